//! Time of one `HostStore::write` of 1,000 groups' states
//! (`host_store_write/1000`): one record appended and one `sync_data`, and
//! the compactions the writes cause as they come (about one per 1 MiB of
//! log, here every 200 writes or so). The directory is `TENURE_BENCH_DIR`
//! if set (put it on the disk whose fsync you want measured), else one
//! under `/dev/shm` where it exists (tmpfs: the encoding and system calls
//! alone), else the system's temp directory.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use tenure::HardState;
use tenure::adapters::host_store::HostStore;
use tenure::adapters::storage::StateOwner;
use tenure::host::GroupId;

const GROUPS: u64 = 1_000;

fn bench_dir() -> PathBuf {
    let base = std::env::var_os("TENURE_BENCH_DIR")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    base.join(format!("tenure-bench-host-store-{}", std::process::id()))
}

fn host_store_write(c: &mut Criterion) {
    let dir = bench_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let owner = StateOwner {
        node: 1,
        cluster: 7,
    };
    let (mut store, _) = HostStore::open(&dir, owner).unwrap();
    let mut term = 0;
    let mut g = c.benchmark_group("host_store_write");
    g.bench_function(BenchmarkId::from_parameter(GROUPS), |b| {
        b.iter_batched(
            || {
                // Every group's next term and vote, as one host step would.
                term += 1;
                (0..GROUPS)
                    .map(|group: GroupId| (group, HardState::new(term, Some(1 + group % 3))))
                    .collect::<Vec<_>>()
            },
            |states| store.write(black_box(&states), &[]).unwrap(),
            BatchSize::SmallInput,
        )
    });
    g.finish();
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, host_store_write);
criterion_main!(benches);
