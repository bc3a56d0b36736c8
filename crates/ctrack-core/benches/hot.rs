//! The per-packet path, piece by piece: parsing, key extraction, one
//! packet through the tracker, bursts of 32; the cost of translation per
//! packet (against the same packet untranslated, in the same run) and of
//! reassembly per datagram.
//!
//! `cargo bench -p ctrack-core --bench hot`

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ctrack_core::packet::extract::{ExtractOptions, extract};
use ctrack_core::{
    Config, CtAction, FragConfig, LinkType, Outputs, Pipeline, Stats, Time, Tracker,
};
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
    let mut s = Stats::default();
    t.process(&f, LinkType::Ethernet, &a, Time::ZERO, &mut s);
    t.process(&udp(1, true), LinkType::Ethernet, &a, Time::ZERO, &mut s);
    g.bench_function("process_established", |b| {
        b.iter(|| black_box(t.process(black_box(&f), LinkType::Ethernet, &a, Time::ZERO, &mut s)))
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
                &mut s,
            );
        })
    });
    let frames: Vec<Vec<u8>> = (0..32).map(|i| udp(i, i % 2 == 1)).collect();
    for fr in &frames {
        t.process(fr, LinkType::Ethernet, &a, Time::ZERO, &mut s);
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
                &mut s,
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
        t.process(&udp(i, false), LinkType::Ethernet, &a, Time::ZERO, &mut s);
        t.process(&udp(i, true), LinkType::Ethernet, &a, Time::ZERO, &mut s);
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
                &mut s,
            );
        })
    });
    g.finish();
}

fn tcp(c: [u8; 4], sp: u16, s: [u8; 4], dp: u16, flags: u16, seq: u32, ack: u32) -> Vec<u8> {
    Frame::v4(c, s, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, &[7; 64])).build()
}

fn nat(c: &mut Criterion) {
    let (cl, sv, n) = ([10, 0, 0, 1], [192, 0, 2, 2], [198, 51, 100, 1]);
    let mut g = c.benchmark_group("nat");
    g.throughput(Throughput::Elements(1));
    for (name, action) in [
        ("established_untranslated", "commit"),
        ("established_snat", "commit,nat(src=198.51.100.1)"),
    ] {
        let t = Tracker::new(Config::default());
        let a: CtAction = action.parse().unwrap();
        let mut s = Stats::default();
        let syn = Frame::v4(cl, sv, L4::tcp_seg(40000, 80, 0x02, 1, 0, 65535, b"")).build();
        t.process_mut(&mut syn.clone(), LinkType::Ethernet, &a, Time::ZERO, &mut s);
        let back = if action.contains("nat") { n } else { cl };
        let synack = Frame::v4(sv, back, L4::tcp_seg(80, 40000, 0x12, 9, 2, 65535, b"")).build();
        t.process_mut(
            &mut synack.clone(),
            LinkType::Ethernet,
            &a,
            Time::ZERO,
            &mut s,
        );
        // The same segment again and again: its sequence number stays in
        // the window.
        let data = tcp(cl, 40000, sv, 80, 0x18, 2, 10);
        let v = t.process_mut(
            &mut data.clone(),
            LinkType::Ethernet,
            &a,
            Time::ZERO,
            &mut s,
        );
        assert!(v.state.to_string().starts_with("est"), "{v:?}");
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || data.clone(),
                |buf| black_box(t.process_mut(buf, LinkType::Ethernet, &a, Time::ZERO, &mut s)),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();

    // A 4000-byte UDP datagram in three fragments, against the same
    // datagram whole, through the pipeline with source translation.
    let mut g = c.benchmark_group("reassembly");
    g.throughput(Throughput::Elements(1));
    let body: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
    let whole = Frame::v4(cl, sv, L4::udp(5000, 53, &body)).build();
    let ip = &whole[14..];
    let data = &ip[20..];
    let mut frags = Vec::new();
    let mut off = 0;
    while off < data.len() {
        let len = 1480.min(data.len() - off);
        let mut f = Frame::v4(
            cl,
            sv,
            L4::Raw {
                proto: 17,
                payload: data[off..off + len].to_vec(),
            },
        );
        f.ident = 77;
        f.more_frags = off + len < data.len();
        f.frag_offset = off as u16;
        frags.push(f.build());
        off += len;
    }
    let a: CtAction = "commit,nat(src=198.51.100.1)".parse().unwrap();
    let p: Pipeline<u32> = Pipeline::new(Tracker::new(Config::default()), FragConfig::default());
    let mut outs = Outputs::default();
    g.bench_function("datagram_whole", |b| {
        b.iter_batched(
            || whole.clone(),
            |f| {
                outs.out.clear();
                p.process(f, 0, LinkType::Ethernet, &a, Time::ZERO, &mut outs);
                black_box(outs.out.len())
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("datagram_in_3_fragments", |b| {
        b.iter_batched(
            || frags.clone(),
            |fs| {
                outs.out.clear();
                for (i, f) in fs.into_iter().enumerate() {
                    p.process(f, i as u32, LinkType::Ethernet, &a, Time::ZERO, &mut outs);
                }
                assert_eq!(outs.out.len(), 3);
                black_box(outs.out.len())
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench, nat);
criterion_main!(benches);
