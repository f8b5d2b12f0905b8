//! `gantry rpc-certs`: an authority with a server and a client certificate
//! for `gantry rpc-server` and its clients, or one more client certificate
//! signed by an authority made before (feature `remote`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use gantry::Error;
use gantry::backends::remote::certs::{self, files};

/// Options of `gantry rpc-certs`.
#[derive(Args, Debug)]
pub struct RpcCertsArgs {
    /// Directory to write to (`ca.pem`, `ca.key`, `server.pem`, `server.key`, `client.pem`, `client.key`).
    #[arg(long)]
    pub out: PathBuf,
    /// Names clients dial the server by (DNS names or IP addresses), comma-separated.
    #[arg(long, default_value = "localhost,127.0.0.1,::1")]
    pub hosts: String,
    /// The client certificate's name.
    #[arg(long, default_value = "gantry client")]
    pub client: String,
    /// Only sign one more client certificate, `NAME.pem` and `NAME.key`, with `--out`'s `ca.key`
    /// (checked against its `ca.pem`).
    #[arg(long, value_name = "NAME")]
    pub add_client: Option<String>,
}

/// Writes the certificates.
pub fn run(args: &RpcCertsArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry rpc-certs: {}", e.detail());
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &RpcCertsArgs) -> gantry::Result<()> {
    if let Some(name) = &args.add_client {
        let read = |name: &str| -> gantry::Result<String> {
            let path = args.out.join(name);
            let read = |source| Error::Io { context: format!("reading {}", path.display()), source };
            // A key or certificate is a few hundred bytes; a FIFO or /dev/zero is refused.
            let bytes = gantry::engine::read_small_file(&path, 1 << 20).map_err(read)?;
            String::from_utf8(bytes).map_err(|e| read(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
        };
        gantry::backends::remote::tls::warn_if_readable_by_others(&args.out.join(files::AUTHORITY_KEY));
        let (authority, key) = (read(files::AUTHORITY)?, read(files::AUTHORITY_KEY)?);
        let pair = certs::client_from_authority(&authority, &key, name).map_err(|e| {
            // No model or backend is involved: the reason without the error kind's prefix.
            let why = e.reason();
            Error::Model(format!("{} and {}: {why}", args.out.join(files::AUTHORITY).display(), files::AUTHORITY_KEY))
        })?;
        let (cert, key) = certs::write_client(&pair, &args.out, name)?;
        println!("client certificate {} and key {} (owner-only) written", cert.display(), key.display());
        return Ok(());
    }
    let hosts: Vec<String> =
        args.hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned).collect();
    if hosts.is_empty() {
        return Err(Error::Model("--hosts names no host: the server certificate needs one name clients dial".into()));
    }
    // A second run would replace the authority, and every client
    // certificate it signed would stop working: `write_pki` refuses to
    // write over any of the files.
    let pki = certs::make_pki(&hosts, &args.client)?;
    certs::write_pki(&pki, &args.out)?;
    println!(
        "authority, server ({}) and client certificates written to {} (keep ca.key private)",
        hosts.join(", "),
        args.out.display()
    );
    Ok(())
}
