//! The accept loop: at most `--max-connections` connections at once (more
//! wait in the listen backlog), each served by hyper's HTTP/1 with a header
//! read timeout (which also closes a kept-alive connection that sends
//! nothing), and a graceful end: no new connections, open ones finish.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Serves `router` on `listener` until `stop` completes, then waits up to
/// `drain` for open connections to finish.
pub async fn accept_loop(
    listener: TcpListener,
    router: Router,
    max_connections: usize,
    header_timeout: Duration,
    drain: Duration,
    stop: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            () = &mut stop => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut builder = hyper::server::conn::http1::Builder::new();
        // A client that closes its side is gone: hyper notices the end of its
        // input while a reply is being computed and drops the request, which
        // cancels its generation. (Half-closed requests, `nc -N`, are
        // therefore not answered: allowing them hid every disconnect of a
        // request that is not streamed until its reply was written.)
        builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true).half_close(false);
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after {:.0} s; closing them", drain.as_secs_f64());
    }
}
