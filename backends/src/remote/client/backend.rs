//! A stream on a remote device: a split is one call that returns when the
//! server has computed it.

use std::any::Any;

use gantry_engine::{Backend, ComputeStatus, Context, Device, Error, EventId, Graph, Result, TensorId};

use super::buffer::RemoteBuffer;
use super::device::RemoteDevice;
use super::encode::encode_split;
use crate::remote::wire::{Request, Response, WireLocation};

/// A backend on a [`RemoteDevice`]. Computing is synchronous (the call
/// returns once the server is done), so events complete when recorded.
pub struct RemoteBackend {
    device: RemoteDevice,
}

impl RemoteBackend {
    pub(crate) fn new(device: RemoteDevice) -> Self {
        Self { device }
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
                return Err(Error::Backend {
                    backend: self.device.name().to_owned(),
                    reason: format!("tensor {} is in a buffer of a lost connection", ctx.describe(t)),
                });
            }
            Ok(WireLocation { buffer: handle, offset: placement.offset as u64 })
        };
        let wire = encode_split(ctx, graph.nodes(), &mut locate)?;
        let Some(generation) = generation else { return Ok(()) };
        match inner.link.call_on(generation, &Request::GraphCompute { device: inner.index, graph: wire })? {
            Response::Done => Ok(()),
            other => Err(Error::Backend {
                backend: self.device.name().to_owned(),
                reason: format!("compute answered {other:?}"),
            }),
        }
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
