//! The gate's order, counted in grants: no clock is read by the checks.

use tokio::sync::mpsc;

use super::*;

use Priority::{Interactive, Offline, Online};

fn gate(slots: usize, queue: usize, max_passed_over: u32) -> Arc<Gate> {
    let limits = Limits {
        slots,
        queue,
        max_passed_over,
    };
    Gate::new("t", limits, Arc::new(Unobserved))
}

/// Test-only: an occupancy nobody watches.
struct Unobserved;

impl Occupancy for Unobserved {
    fn band(&self, _: &str, _: Priority, _: usize, _: usize) {}
}

type Granted = (&'static str, Result<(Slot, Waited), Refused>);

/// Starts a request of `band` named `name` that reports its answer on `tx`,
/// and waits until it is queued (or answered).
async fn ask(
    g: &Arc<Gate>,
    tx: &mpsc::UnboundedSender<Granted>,
    name: &'static str,
    band: Priority,
) {
    let before = g.lock().next_id;
    let (g2, tx) = (g.clone(), tx.clone());
    let task = tokio::spawn(async move {
        let _ = tx.send((name, g2.acquire(band).await));
    });
    while g.lock().next_id == before && !task.is_finished() {
        tokio::task::yield_now().await;
    }
}

/// Frees `slot` and returns the name granted next.
async fn next(
    rx: &mut mpsc::UnboundedReceiver<Granted>,
    slot: Slot,
) -> (&'static str, Slot, Waited) {
    drop(slot);
    let (name, r) = rx.recv().await.expect("a grant");
    let (slot, waited) = r.unwrap_or_else(|e| panic!("{name} refused: {e:?}"));
    (name, slot, waited)
}

#[tokio::test]
async fn a_free_slot_goes_to_the_most_urgent_band_then_the_oldest() {
    let g = gate(1, 10, 4);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (mut slot, _) = g.acquire(Online).await.expect("a free slot");
    for (name, band) in [
        ("o1", Offline),
        ("n1", Online),
        ("o2", Offline),
        ("i1", Interactive),
        ("n2", Online),
    ] {
        ask(&g, &tx, name, band).await;
    }
    let mut order = Vec::new();
    let mut passed = Vec::new();
    for _ in 0..5 {
        let (name, s, waited) = next(&mut rx, slot).await;
        order.push(name);
        passed.push(waited.passed_over);
        slot = s;
    }
    assert_eq!(order, ["i1", "n1", "n2", "o1", "o2"]);
    // o1 waited behind i1, n1 and n2; o2 likewise.
    assert_eq!(passed, [0, 1, 1, 3, 3]);
}

#[tokio::test]
async fn a_waiting_offline_request_gets_a_slot_after_at_most_max_passed_over_online_ones() {
    let g = gate(1, 10, 2);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (mut slot, _) = g.acquire(Online).await.expect("a free slot");
    ask(&g, &tx, "off", Offline).await;
    for name in ["n1", "n2", "n3", "n4", "n5"] {
        ask(&g, &tx, name, Online).await;
    }
    let mut order = Vec::new();
    for _ in 0..6 {
        let (name, s, _) = next(&mut rx, slot).await;
        order.push(name);
        slot = s;
    }
    assert_eq!(order, ["n1", "n2", "off", "n3", "n4", "n5"]);
}

#[tokio::test]
async fn a_full_queue_sheds_the_newest_lower_band_waiter_and_refuses_its_own_band() {
    let g = gate(1, 2, 4);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (slot, _) = g.acquire(Online).await.expect("a free slot");
    ask(&g, &tx, "o1", Offline).await;
    ask(&g, &tx, "o2", Offline).await;
    // Full: an online request takes the newest offline waiter's place.
    ask(&g, &tx, "n1", Online).await;
    let (name, r) = rx.recv().await.expect("an answer");
    assert_eq!(name, "o2");
    assert!(matches!(r, Err(Refused::Shed { by: Online })), "{r:?}");
    // Full again: another offline one is refused, not queued.
    assert!(matches!(g.acquire(Offline).await, Err(Refused::QueueFull)));
    // An interactive one sheds the remaining offline waiter.
    ask(&g, &tx, "i1", Interactive).await;
    let (name, r) = rx.recv().await.expect("an answer");
    assert_eq!(name, "o1");
    assert!(matches!(r, Err(Refused::Shed { by: Interactive })), "{r:?}");
    // Online and interactive waiting: an online arrival has no one below.
    assert!(matches!(g.acquire(Online).await, Err(Refused::QueueFull)));
    let (name, _, _) = next(&mut rx, slot).await;
    assert_eq!(name, "i1");
}

#[tokio::test]
async fn without_a_queue_a_full_gate_refuses_at_once_and_a_dropped_waiter_leaves() {
    let g = gate(1, 0, 4);
    let (slot, _) = g.acquire(Offline).await.expect("a free slot");
    assert!(matches!(g.acquire(Interactive).await, Err(Refused::Full)));
    drop(slot);
    assert!(g.acquire(Online).await.is_ok(), "the slot came back");

    let g = gate(1, 1, 4);
    let (slot, _) = g.acquire(Online).await.expect("a free slot");
    let waiting = tokio::spawn({
        let g = g.clone();
        async move { g.acquire(Online).await.map(|_| ()) }
    });
    while g.lock().queued() == 0 {
        tokio::task::yield_now().await;
    }
    waiting.abort();
    let _ = waiting.await;
    assert_eq!(g.lock().queued(), 0, "the aborted waiter left the queue");
    drop(slot);
    assert_eq!(g.lock().busy(), 0, "no slot leaked");
}
