//! The Internet checksum over the sizes a tracker meets: a small datagram's
//! payload (26 bytes: a 64-byte frame's UDP header and data), a TCP segment
//! of a 128-byte frame, and full-sized TCP segments (1,460 and 8,960
//! bytes, the payloads of 1,500- and 9,000-byte frames). Each is summed
//! with a pseudo-header in front and folded, as verifying a transport
//! checksum does.
//!
//! Run with `cargo bench -p ctrack-wire --bench checksum`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ctrack_wire::checksum::{is_valid, pseudo_header_v4, sum};

fn checksum(c: &mut Criterion) {
    let mut g = c.benchmark_group("checksum");
    for len in [26usize, 94, 1460, 8960] {
        let data: Vec<u8> = (0..len as u32).map(|i| (i * 131 + 7) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("verify", len), &data, |b, d| {
            b.iter(|| {
                let pseudo = pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 6, d.len() as u32);
                is_valid(sum(pseudo, black_box(d)))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, checksum);
criterion_main!(benches);
