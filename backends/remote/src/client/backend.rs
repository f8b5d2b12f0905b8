//! A stream on a remote device: a split is one call that returns when the
//! server has computed it.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Mutex;

use gantry_engine::{
    Backend, BackendErrorKind, ComputeStatus, Context, Device, Error, EventId, Graph, Result, TensorId,
};

use super::buffer::RemoteBuffer;
use super::device::RemoteDevice;
use super::encode::encode_split;
use crate::wire::{DIGEST_BYTES, Request, Response, WireLocation, graph_digest};

/// A backend on a [`RemoteDevice`]. Computing is synchronous (the call
/// returns once the server is done), so events complete when recorded.
///
/// A split computed before, unchanged (a decode step's), is asked for by its
/// digest: the server computes the graph it kept, and neither the graph nor
/// its checks cross the wire again.
pub struct RemoteBackend {
    device: RemoteDevice,
    /// (connection generation, digest) of the graphs the server should hold, most recent last.
    held: Mutex<VecDeque<(u64, [u8; DIGEST_BYTES])>>,
}

impl RemoteBackend {
    pub(crate) fn new(device: RemoteDevice) -> Self {
        Self { device, held: Mutex::new(VecDeque::new()) }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, [u8; DIGEST_BYTES])>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn done(&self, what: &str, response: Response) -> Result<()> {
        match response {
            Response::Done => Ok(()),
            other => Err(Error::backend(
                self.device.name(),
                BackendErrorKind::Protocol,
                format!("{what} answered {other:?}"),
            )),
        }
    }

    fn compute(&self, ctx: &Context, graph: Graph<'_>) -> Result<()> {
        if graph.nodes().is_empty() {
            return Ok(());
        }
        let inner = &self.device.inner;
        let mut generation = None;
        let mut locate = |t: TensorId| -> Result<WireLocation> {
            let (entry, placement) = ctx.tensor_buffer(t)?;
            let located = entry
                .buffer
                .as_any()
                .downcast_ref::<RemoteBuffer>()
                .and_then(|b| b.handle_on(&inner.link, inner.index));
            let Some((handle, g)) = located else {
                return Err(Error::Unsupported(format!(
                    "{}: tensor {} is in {} memory; a remote device computes on its own buffers",
                    self.device.name(),
                    ctx.describe(t),
                    entry.buffer_type.name()
                )));
            };
            if *generation.get_or_insert(g) != g {
                let reason = format!("tensor {} is in a buffer of a lost connection", ctx.describe(t));
                return Err(Error::backend(self.device.name(), BackendErrorKind::Transport, reason));
            }
            Ok(WireLocation { buffer: handle, offset: placement.offset as u64 })
        };
        let wire = encode_split(ctx, graph.nodes(), &mut locate)?;
        let Some(generation) = generation else { return Ok(()) };
        let digest = graph_digest(inner.index, &wire);
        let key = (generation, digest);
        if self.held().contains(&key) {
            match inner.link.call_on(generation, &Request::GraphComputeAgain { device: inner.index, digest })? {
                Response::UnknownGraph => self.held().retain(|k| *k != key),
                other => return self.done("compute again", other),
            }
        }
        let response = inner.link.call_on(generation, &Request::GraphCompute { device: inner.index, graph: wire })?;
        self.done("compute", response)?;
        let mut held = self.held();
        held.retain(|k| *k != key && k.0 == generation);
        held.push_back(key);
        while held.len() > inner.link.limits().kept_graphs {
            held.pop_front();
        }
        Ok(())
    }
}

impl Backend for RemoteBackend {
    fn name(&self) -> &str {
        self.device.name()
    }

    fn device(&self) -> &dyn Device {
        &self.device
    }

    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        match self.compute(ctx, graph) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn event_record(&self, event: EventId) -> Result<()> {
        // Every call before this one has returned: its work is done.
        self.device.events().record(event)
    }

    fn event_wait(&self, event: EventId) -> Result<()> {
        self.device.events().wait(event)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
