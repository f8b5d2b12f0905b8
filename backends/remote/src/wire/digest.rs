//! The name of a run of bytes in the server's weight cache: its SHA-256.

use super::DIGEST_BYTES;

/// SHA-256 of `data` (ring's implementation, the TLS provider's).
///
/// ```
/// use gantry_remote::wire::content_digest;
/// let d = content_digest(b"abc");
/// assert_eq!(d[..4], [0xba, 0x78, 0x16, 0xbf]);
/// ```
pub fn content_digest(data: &[u8]) -> [u8; DIGEST_BYTES] {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    let mut out = [0u8; DIGEST_BYTES];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The name of a graph for [`super::Request::GraphComputeAgain`]: SHA-256
/// of the device index and the graph as encoded (the encoding is canonical,
/// so client and server agree).
pub fn graph_digest(device: u32, graph: &super::WireGraph<'_>) -> [u8; DIGEST_BYTES] {
    let mut w = super::Writer::new();
    w.u32(device);
    graph.write(&mut w);
    content_digest(w.as_bytes())
}
