//! Topologies the simulator tests share.

/// Greedy 10 Gb/s senders `h0`… into one 10 Gb/s port `sw0` → `r0` (the FQCN paper's
/// dumbbell: 150 KB output buffer, standard QCN, Qeq 33 KB, 12.5 µs per link), with `seed`
/// and `duration`; `host_extra` is added to each sender's `[host]` table.
pub fn greedy_dumbbell(seed: u64, duration: &str, senders: usize, host_extra: &str) -> String {
    let mut t = format!(
        r#"
        seed = {seed}
        duration = "{duration}"
        [switch.sw0.bridge]
        buffers = {{ output = "150KB", on_output_full = "drop" }}
        cp = {{ cp_queue_set_point = "33KB" }}
        [host.r0]
        [[link]]
        a = "sw0"
        b = "r0"
        rate = "10gbit"
        delay = "12.5us"
        "#,
    );
    for i in 0..senders {
        t.push_str(&format!(
            "[host.h{i}]\n{host_extra}\n[[link]]\na = \"h{i}\"\nb = \"sw0\"\nrate = \"10gbit\"\n\
             delay = \"12.5us\"\n[[flow]]\nsrc = \"h{i}\"\ndst = \"r0\"\npattern = \"greedy\"\n"
        ));
    }
    t
}
