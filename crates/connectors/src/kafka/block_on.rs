//! Waits for one of librdkafka's admin futures on the calling thread. The admin client's
//! futures are one-shot channels that librdkafka's own background thread completes; they
//! need no reactor or timer, so a parked thread woken by the channel serves, and the
//! connectors need no async runtime (and none can panic by being started inside
//! another's).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion, parking the thread between wake-ups.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        // A wake-up that came before the park makes it return at once; a spurious one
        // only costs another poll.
        thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_completed_by_another_thread_is_waited_for() {
        let (tx, rx) = std::sync::mpsc::channel::<Waker>();
        let mut sent = false;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let helper = thread::spawn(move || {
            let waker = rx.recv().unwrap();
            flag.store(true, std::sync::atomic::Ordering::Release);
            waker.wake();
        });
        let polled = std::future::poll_fn(|cx| {
            if done.load(std::sync::atomic::Ordering::Acquire) {
                return Poll::Ready(7);
            }
            if !sent {
                sent = true;
                tx.send(cx.waker().clone()).unwrap();
            }
            Poll::Pending
        });
        assert_eq!(block_on(polled), 7);
        helper.join().unwrap();
    }
}
