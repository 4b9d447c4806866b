//! Independent jobs on a few threads: the seeds of a sweep, the seeds of a twin.
//!
//! Each job is one whole run (a process or a simulation) lasting seconds, so the pool is the
//! plainest one that keeps every worker busy: scoped threads take the next index from a shared
//! counter until none is left. SIGINT/SIGTERM ([`crate::signals`]) stops the handing out of new
//! jobs; the ones running finish, and the caller sees which never started.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `job(i)` for every `i < n` on up to `workers` threads (at least one) and returns the
/// results in index order: `None` for a job that never started because a stop was requested.
/// A job that panics panics the caller, once the other workers are done.
pub fn map_indexed<T, F>(n: usize, workers: usize, job: F) -> Vec<Option<T>>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    let next = AtomicUsize::new(0);
    let mut out: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
    let finished: Vec<std::thread::Result<Vec<(usize, T)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers.clamp(1, n.max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    while !crate::signals::requested() {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        mine.push((i, job(i)));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    for w in finished {
        match w {
            Ok(mine) => {
                for (i, t) in mine {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = Some(t);
                    }
                }
            }
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_job_runs_once_and_comes_back_in_index_order() {
        let seen = Mutex::new(Vec::new());
        let out = map_indexed(37, 4, |i| {
            seen.lock().unwrap().push(i);
            i * 10
        });
        let want: Vec<Option<usize>> = (0..37).map(|i| Some(i * 10)).collect();
        assert_eq!(out, want);
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..37).collect::<Vec<_>>());
    }

    #[test]
    fn the_jobs_share_the_workers() {
        // Two workers, four jobs that each wait for a second job to be running: one worker
        // alone would never get past the first.
        let running = AtomicUsize::new(0);
        let out = map_indexed(4, 2, |i| {
            running.fetch_add(1, Ordering::SeqCst);
            let t0 = std::time::Instant::now();
            while running.load(Ordering::SeqCst) < 2 {
                assert!(t0.elapsed().as_secs() < 30, "job {i} ran alone");
                std::thread::yield_now();
            }
            i
        });
        assert_eq!(out, vec![Some(0), Some(1), Some(2), Some(3)]);
    }

    #[test]
    fn no_jobs_and_zero_workers_are_fine() {
        assert!(map_indexed(0, 3, |i| i).is_empty());
        assert_eq!(map_indexed(2, 0, |i| i), vec![Some(0), Some(1)]);
    }
}
