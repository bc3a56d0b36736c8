//! The per-packet path, piece by piece: parsing, key extraction, one
//! packet through the tracker, and bursts of 32.
//!
//! `cargo bench -p ctrack-core --bench hot`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctrack_core::extract::{ExtractOptions, extract};
use ctrack_core::{Config, CtAction, LinkType, Time, Tracker};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::parse_frame;

fn udp(i: u16, reply: bool) -> Vec<u8> {
    let c = [10, 0, (i >> 8) as u8, i as u8];
    let s = [172, 16, 0, 1];
    if reply {
        Frame::v4(s, c, L4::udp(53, 1024 + i, &[0; 18])).build()
    } else {
        Frame::v4(c, s, L4::udp(1024 + i, 53, &[0; 18])).build()
    }
}

fn bench(c: &mut Criterion) {
    let f = udp(1, false);
    let mut g = c.benchmark_group("packet");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_frame", |b| {
        b.iter(|| black_box(parse_frame(black_box(&f), LinkType::Ethernet)))
    });
    let layers = parse_frame(&f, LinkType::Ethernet);
    g.bench_function("extract", |b| {
        b.iter(|| {
            black_box(extract(
                black_box(&f),
                &layers,
                0,
                ExtractOptions::default(),
            ))
        })
    });
    let t = Tracker::new(Config::default());
    let a = CtAction::commit(0);
    t.process(&f, LinkType::Ethernet, &a, Time::ZERO);
    t.process(&udp(1, true), LinkType::Ethernet, &a, Time::ZERO);
    g.bench_function("process_established", |b| {
        b.iter(|| black_box(t.process(black_box(&f), LinkType::Ethernet, &a, Time::ZERO)))
    });
    g.finish();

    let mut g = c.benchmark_group("batch32");
    g.throughput(Throughput::Elements(32));
    let same: Vec<&[u8]> = (0..32).map(|_| f.as_slice()).collect();
    let mut out = Vec::with_capacity(32);
    g.bench_function("one_flow", |b| {
        b.iter(|| {
            out.clear();
            t.process_batch(
                black_box(&same),
                LinkType::Ethernet,
                &a,
                Time::ZERO,
                &mut out,
            );
        })
    });
    let frames: Vec<Vec<u8>> = (0..32).map(|i| udp(i, i % 2 == 1)).collect();
    for fr in &frames {
        t.process(fr, LinkType::Ethernet, &a, Time::ZERO);
    }
    let many: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    g.bench_function("32_flows", |b| {
        b.iter(|| {
            out.clear();
            t.process_batch(
                black_box(&many),
                LinkType::Ethernet,
                &a,
                Time::ZERO,
                &mut out,
            );
        })
    });
    // 1024 connections, both directions, in a scrambled order: no two
    // consecutive packets share a connection and the table fits in cache.
    let frames: Vec<Vec<u8>> = (0..2048u32)
        .map(|k| {
            let j = (k.wrapping_mul(2_654_435_761) >> 5) % 2048;
            udp((j / 2) as u16, j % 2 == 1)
        })
        .collect();
    for i in 0..1024u16 {
        t.process(&udp(i, false), LinkType::Ethernet, &a, Time::ZERO);
        t.process(&udp(i, true), LinkType::Ethernet, &a, Time::ZERO);
    }
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let mut k = 0;
    g.bench_function("1024_flows_scrambled", |b| {
        b.iter(|| {
            out.clear();
            let batch = &refs[k..k + 32];
            k = (k + 32) % 2048;
            t.process_batch(
                black_box(batch),
                LinkType::Ethernet,
                &a,
                Time::ZERO,
                &mut out,
            );
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
