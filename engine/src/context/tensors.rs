//! The tensor table: create, look up, name, flag, remove, rewind.

use gantry_arenas::TensorId;

use super::{Context, Mark, shape4, stale_tensor};
use crate::tensor::TensorFlags;
use crate::{DType, Error, Name, Result, TensorDesc};

impl Context {
    /// A new contiguous leaf tensor of `dtype` with up to 4 dimensions.
    pub fn tensor(&mut self, dtype: DType, shape: impl AsRef<[usize]>) -> Result<TensorId> {
        let ne = shape4(shape.as_ref())?;
        let desc = TensorDesc::contiguous(dtype, ne)
            .map_err(|reason| Error::InvalidTensor { tensor: format!("new {dtype} {ne:?}"), reason })?;
        Ok(self.insert(desc))
    }

    /// Inserts a description as is (for loaders and tests; builders validate).
    pub fn insert(&mut self, desc: TensorDesc) -> TensorId {
        let id = self.tensors.insert(desc);
        self.created.push(id);
        id
    }

    /// Inserts a scratch tensor that [`Context::rewind`] does not track: the
    /// owner (the scheduler, for its copies) removes it itself.
    pub fn insert_scratch(&mut self, desc: TensorDesc) -> TensorId {
        self.tensors.insert(desc)
    }

    /// The description of `t`.
    #[inline]
    pub fn desc(&self, t: TensorId) -> Result<&TensorDesc> {
        self.tensors.get(t).ok_or_else(|| stale_tensor(t))
    }

    /// The description of `t`, mutably. Changing the shape of a tensor that
    /// other tensors read is the caller's responsibility.
    pub fn desc_mut(&mut self, t: TensorId) -> Result<&mut TensorDesc> {
        self.revision += 1;
        self.tensors.get_mut(t).ok_or_else(|| stale_tensor(t))
    }

    /// The description of `t`, mutably, without counting a revision: for a
    /// change its maker undoes before it returns (the scheduler pointing
    /// sources at its copies while it computes), which nobody else sees.
    pub(crate) fn desc_mut_untracked(&mut self, t: TensorId) -> Result<&mut TensorDesc> {
        self.tensors.get_mut(t).ok_or_else(|| stale_tensor(t))
    }

    /// A counter that changes with every change to what tensors are, where
    /// they live, or which buffers exist: a description changed
    /// ([`Context::desc_mut`], names and flags included), a tensor removed, a
    /// placement made or undone, a buffer added, freed, or given another
    /// usage. Writing tensor data and creating tensors do not change it. The
    /// scheduler compares it to skip placing a graph that nothing touched.
    ///
    /// ```
    /// use gantry_engine::{Context, DType};
    /// let mut ctx = Context::new();
    /// let x = ctx.tensor(DType::F32, [4])?;
    /// let before = ctx.revision();
    /// ctx.set_input(x)?;
    /// assert_ne!(ctx.revision(), before);
    /// # Ok::<(), gantry_engine::Error>(())
    /// ```
    #[inline]
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The description of `t`, or `None` for a stale id.
    #[inline]
    pub fn get(&self, t: TensorId) -> Option<&TensorDesc> {
        self.tensors.get(t)
    }

    /// Whether `t` is a live tensor of this context.
    pub fn contains(&self, t: TensorId) -> bool {
        self.tensors.contains_key(t)
    }

    /// Number of live tensors.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// One more than the largest slot index in use (bitsets over tensors use this).
    pub fn slot_capacity(&self) -> usize {
        self.tensors.capacity()
    }

    /// Every live tensor, in no particular order.
    pub fn tensors(&self) -> impl Iterator<Item = (TensorId, &TensorDesc)> + '_ {
        self.tensors.iter()
    }

    /// `t`'s name, or `""`.
    pub fn name(&self, t: TensorId) -> &str {
        self.tensors.get(t).map_or("", |d| d.name.as_str())
    }

    /// Names `t` (cut to 63 bytes). Returns `t` for chaining.
    pub fn set_name(&mut self, t: TensorId, name: &str) -> Result<TensorId> {
        self.desc_mut(t)?.name = Name::new(name);
        Ok(t)
    }

    /// The first live tensor named `name`.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.tensors.iter().find(|(_, d)| d.name.as_str() == name).map(|(id, _)| id)
    }

    /// Marks `t` as a graph input (written by the user before each compute).
    pub fn set_input(&mut self, t: TensorId) -> Result<()> {
        self.add_flags(t, TensorFlags::INPUT)
    }

    /// Marks `t` as a graph output (its memory is never reused).
    pub fn set_output(&mut self, t: TensorId) -> Result<()> {
        self.add_flags(t, TensorFlags::OUTPUT)
    }

    /// Marks `t` as a trainable parameter.
    pub fn set_param(&mut self, t: TensorId) -> Result<()> {
        self.add_flags(t, TensorFlags::PARAM)
    }

    fn add_flags(&mut self, t: TensorId, f: TensorFlags) -> Result<()> {
        let d = self.desc_mut(t)?;
        d.flags = d.flags.with(f);
        Ok(())
    }

    /// A short human description of `t` for messages: name (or id), dtype, shape.
    pub fn describe(&self, t: TensorId) -> String {
        match self.tensors.get(t) {
            None => format!("<stale tensor {t:?}>"),
            Some(d) if d.name.is_empty() => format!("{t:?} ({} {:?})", d.dtype, d.ne),
            Some(d) => format!("'{}' ({} {:?})", d.name, d.dtype, d.ne),
        }
    }

    /// The current end of the tensor table; see [`Context::rewind`].
    pub fn mark(&self) -> Mark {
        Mark(self.created.len())
    }

    /// Removes every tensor created after `mark` (a graph's intermediate
    /// tensors, before building it again). Their slots are reused by the next
    /// tensors, so a rebuild of the same graph allocates nothing.
    pub fn rewind(&mut self, mark: Mark) {
        if self.created.len() > mark.0 {
            self.revision += 1;
        }
        while self.created.len() > mark.0 {
            if let Some(t) = self.created.pop() {
                self.tensors.remove(t);
                self.placements.remove(t);
            }
        }
    }

    /// Removes one tensor. Tensors that read it keep a stale id.
    pub fn remove(&mut self, t: TensorId) -> Result<TensorDesc> {
        self.revision += 1;
        if self.created.last() == Some(&t) {
            self.created.pop();
        }
        self.placements.remove(t);
        self.tensors.remove(t).ok_or_else(|| stale_tensor(t))
    }
}
