//! Model checks (loom) of the state a device shares between threads
//! (`gantry_engine::device_state`, what the wgpu backend keeps its events,
//! kernel and bind-group caches and counters in), each the real type, with
//! stand-ins for the device's submissions (a number) and objects (numbers):
//! wgpu cannot run under loom.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p gantry-backends --test loom_device_state`.
#![cfg(loom)]

use std::collections::HashMap;

use gantry_engine::EventId;
use gantry_engine::device_state::{ByteCounter, IdCounter, LazyCache, QueueEvents};
use gantry_engine::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use gantry_engine::sync::{Arc, Mutex, lock, thread};

/// An event table over queue points (submission numbers here).
trait Events: Default + Send + Sync + 'static {
    fn create(&self) -> EventId;
    fn free(&self, e: EventId) -> bool;
    fn record(&self, e: EventId, point: u64) -> bool;
    fn point(&self, e: EventId) -> Option<Option<u64>>;
}

impl Events for QueueEvents<u64> {
    fn create(&self) -> EventId {
        QueueEvents::create(self)
    }
    fn free(&self, e: EventId) -> bool {
        QueueEvents::free(self, e)
    }
    fn record(&self, e: EventId, point: u64) -> bool {
        QueueEvents::record(self, e, point)
    }
    fn point(&self, e: EventId) -> Option<Option<u64>> {
        QueueEvents::point(self, e)
    }
}

/// A wrong table for the model to catch: events in a map, and a record that
/// checks the event is live, then stores under a second lock, so a free in
/// between is undone.
#[derive(Default)]
struct CheckThenStore {
    /// Where new ids come from (never reused).
    ids: QueueEvents<u64>,
    map: Mutex<HashMap<EventId, Option<u64>>>,
}

impl Events for CheckThenStore {
    fn create(&self) -> EventId {
        let e = self.ids.create();
        lock(&self.map).insert(e, None);
        e
    }
    fn free(&self, e: EventId) -> bool {
        lock(&self.map).remove(&e).is_some()
    }
    fn record(&self, e: EventId, point: u64) -> bool {
        let live = lock(&self.map).contains_key(&e);
        if live {
            lock(&self.map).insert(e, Some(point));
        }
        live
    }
    fn point(&self, e: EventId) -> Option<Option<u64>> {
        lock(&self.map).get(&e).copied()
    }
}

/// One thread records an event while another frees it, and a third event
/// is made and recorded meanwhile: each call ends in "done" or "stale",
/// a record seen by a later call is the one made, and once both threads
/// have joined the freed event stays freed (no record brings it back).
fn record_races_free<E: Events>() {
    loom::model(|| {
        let events = Arc::new(E::default());
        let e = events.create();
        let recorder = {
            let events = events.clone();
            thread::spawn(move || {
                let recorded = events.record(e, 7);
                let other = events.create();
                assert!(events.record(other, 8), "a new event can be recorded");
                (recorded, other)
            })
        };
        assert!(events.free(e), "freed once");
        let (_, other) = recorder.join().unwrap();
        assert_ne!(other, e, "a new event is not the freed one");
        assert_eq!(events.point(e), None, "a freed event came back");
        assert!(!events.record(e, 9) && !events.free(e), "a freed event is stale");
        assert_eq!(events.point(other), Some(Some(8)));
    });
}

#[test]
fn queue_events_record_racing_free() {
    record_races_free::<QueueEvents<u64>>();
}

/// The model can fail: a record that checks and stores under two locks is caught.
#[test]
#[should_panic(expected = "a freed event came back")]
fn a_check_then_store_record_is_caught() {
    record_races_free::<CheckThenStore>();
}

/// A record on one thread published to a waiter on another through a flag:
/// once the waiter sees the flag, it sees the recorded point.
#[test]
fn a_record_is_seen_by_a_later_wait() {
    loom::model(|| {
        let events = Arc::new(QueueEvents::<u64>::default());
        let e = events.create();
        let done = Arc::new(AtomicUsize::new(0));
        let recorder = {
            let (events, done) = (events.clone(), done.clone());
            thread::spawn(move || {
                assert!(events.record(e, 3));
                done.store(1, Ordering::Release);
            })
        };
        let point = events.point(e).expect("live");
        if done.load(Ordering::Acquire) == 1 {
            assert_eq!(events.point(e), Some(Some(3)));
        } else {
            assert!(point.is_none() || point == Some(3));
        }
        recorder.join().unwrap();
        assert_eq!(events.point(e), Some(Some(3)));
    });
}

/// A cache filled on first use (kernels, bind groups).
trait Cache: Default + Send + Sync + 'static {
    fn get_or_try_insert_with(&self, key: u32, make: &mut dyn FnMut() -> Result<u64, ()>) -> Result<u64, ()>;
    fn len(&self) -> usize;
}

impl Cache for LazyCache<u32, u64> {
    fn get_or_try_insert_with(&self, key: u32, make: &mut dyn FnMut() -> Result<u64, ()>) -> Result<u64, ()> {
        LazyCache::get_or_try_insert_with(self, &key, make)
    }
    fn len(&self) -> usize {
        LazyCache::len(self)
    }
}

/// A wrong cache for the model to catch: it looks the key up, makes the
/// value without the lock (not to block other keys while compiling), then
/// inserts, so two threads asking for one new key both make it.
#[derive(Default)]
struct MakeOutsideTheLock(Mutex<HashMap<u32, u64>>);

impl Cache for MakeOutsideTheLock {
    fn get_or_try_insert_with(&self, key: u32, make: &mut dyn FnMut() -> Result<u64, ()>) -> Result<u64, ()> {
        if let Some(v) = lock(&self.0).get(&key) {
            return Ok(*v);
        }
        let v = make()?;
        Ok(*lock(&self.0).entry(key).or_insert(v))
    }
    fn len(&self) -> usize {
        lock(&self.0).len()
    }
}

/// Two threads ask for the same new key (a kernel both need), each making a
/// different value: it is made once and both get that value. A failed make
/// keeps nothing, and the next ask makes it.
fn made_once<C: Cache>() {
    loom::model(|| {
        let cache = Arc::new(C::default());
        let makes = Arc::new(AtomicUsize::new(0));
        let ask = |cache: Arc<C>, makes: Arc<AtomicUsize>, value: u64| {
            move || {
                cache.get_or_try_insert_with(1, &mut || {
                    makes.fetch_add(1, Ordering::Relaxed);
                    Ok(value)
                })
            }
        };
        let other = thread::spawn(ask(cache.clone(), makes.clone(), 20));
        let mine = ask(cache.clone(), makes.clone(), 10)().unwrap();
        let theirs = other.join().unwrap().unwrap();
        assert_eq!(makes.load(Ordering::Relaxed), 1, "a value made twice");
        assert_eq!(mine, theirs, "both threads get the value kept");
        assert_eq!(cache.get_or_try_insert_with(2, &mut || Err(())), Err(()));
        assert_eq!(cache.len(), 1, "a failed make keeps nothing");
        assert_eq!(cache.get_or_try_insert_with(2, &mut || Ok(5)), Ok(5));
        assert_eq!(cache.len(), 2);
    });
}

#[test]
fn lazy_cache_makes_a_value_once() {
    made_once::<LazyCache<u32, u64>>();
}

/// The model can fail: making outside the lock is caught.
#[test]
#[should_panic(expected = "a value made twice")]
fn making_outside_the_lock_is_caught() {
    made_once::<MakeOutsideTheLock>();
}

/// Counters shared by threads: ids and bytes.
trait Counter: Send + Sync + 'static {
    fn new() -> Self;
    fn next_id(&self) -> u64;
    fn add(&self, bytes: u64);
    fn sub(&self, bytes: u64);
    fn get(&self) -> u64;
}

/// The real counters side by side.
struct Real(IdCounter, ByteCounter);

impl Counter for Real {
    fn new() -> Self {
        Real(IdCounter::new(1), ByteCounter::default())
    }
    fn next_id(&self) -> u64 {
        self.0.next()
    }
    fn add(&self, bytes: u64) {
        self.1.add(bytes)
    }
    fn sub(&self, bytes: u64) {
        self.1.sub(bytes)
    }
    fn get(&self) -> u64 {
        self.1.get()
    }
}

/// Wrong counters for the model to catch: each update reads, then writes.
struct LoadThenStore(AtomicU64, AtomicU64);

impl Counter for LoadThenStore {
    fn new() -> Self {
        LoadThenStore(AtomicU64::new(1), AtomicU64::new(0))
    }
    fn next_id(&self) -> u64 {
        let id = self.0.load(Ordering::Relaxed);
        self.0.store(id + 1, Ordering::Relaxed);
        id
    }
    // Wrapping, so that a lost update shows as a wrong count (what the
    // model checks), not as an overflow panic in builds with overflow checks.
    fn add(&self, bytes: u64) {
        let n = self.1.load(Ordering::Relaxed);
        self.1.store(n.wrapping_add(bytes), Ordering::Relaxed);
    }
    fn sub(&self, bytes: u64) {
        let n = self.1.load(Ordering::Relaxed);
        self.1.store(n.wrapping_sub(bytes), Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.1.load(Ordering::Relaxed)
    }
}

/// Two threads each make a buffer (an id, its bytes counted) and one frees
/// one: ids are distinct and the byte count is exactly what is still held.
fn counted_exactly<C: Counter>() {
    loom::model(|| {
        let c = Arc::new(C::new());
        let other = {
            let c = c.clone();
            thread::spawn(move || {
                let id = c.next_id();
                c.add(100);
                c.sub(100);
                id
            })
        };
        let mine = c.next_id();
        c.add(8);
        let theirs = other.join().unwrap();
        assert_ne!(mine, theirs, "miscounted: an id handed out twice");
        assert_eq!(c.get(), 8, "miscounted: bytes");
    });
}

#[test]
fn counters_hand_out_distinct_ids_and_count_bytes_exactly() {
    counted_exactly::<Real>();
}

/// The model can fail: read-then-write counters are caught.
#[test]
#[should_panic(expected = "miscounted")]
fn load_then_store_counters_are_caught() {
    counted_exactly::<LoadThenStore>();
}
