//! The redo log part against crashes, torn writes, corruption and a full
//! disk, on the simulated disk (and twice on real files): what a flush made
//! durable is replayed exactly, nothing else ever is.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use storage::disk::{CrashPolicy, Disk, OpenMode, RealDisk, SimDisk};
use storage::redo::{
    Lsn, Recovered, RedoConfig, RedoError, RedoLog, REDO_FILE_HEADER_BYTES,
    REDO_RECORD_HEADER_BYTES, REDO_RECORD_PAYLOAD_MAX_BYTES,
};
use storage::Gci;

mod redo_format_1;

const FILE_BYTES: u64 = 64 << 10;

fn config(files: u32) -> RedoConfig {
    RedoConfig {
        dir: PathBuf::from("/node/redo"),
        part: 1,
        file_size_bytes: FILE_BYTES,
        files,
        earlier_files: None,
    }
}

fn open(disk: &SimDisk, config: &RedoConfig) -> Result<(RedoLog, Recovered), RedoError> {
    RedoLog::open(Box::new(disk.clone()), config.clone())
}

/// Every record a replay up to `upto` yields, as (lsn, gci, payload).
fn replay_all(log: &RedoLog, recovered: &Recovered, upto: Gci) -> Vec<(u64, Gci, Vec<u8>)> {
    let mut replay = log.replay(recovered, upto);
    let mut out = Vec::new();
    while let Some(record) = replay.next_record().unwrap() {
        out.push((record.lsn.0, record.gci, record.payload.to_vec()));
    }
    out
}

fn payloads(records: &[(u64, Gci, Vec<u8>)]) -> Vec<Vec<u8>> {
    records.iter().map(|r| r.2.clone()).collect()
}

/// Crashes `disk` and opens the part again: the GCI it recovers as
/// complete, and the payloads it replays.
fn after_crash(disk: &SimDisk, config: &RedoConfig) -> (Option<Gci>, Vec<Vec<u8>>) {
    disk.crash();
    let (log, recovered) = open(disk, config).unwrap();
    let replayed = payloads(&replay_all(&log, &recovered, 9));
    (recovered.complete_gci, replayed)
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

fn nothing_survives_unsynced(disk: &SimDisk) {
    disk.set_crash_policy(CrashPolicy {
        keep_percent: 0,
        tear_percent: 0,
    });
}

#[test]
fn first_open_creates_preallocated_files() {
    let disk = SimDisk::new(1);
    let config = config(3);
    let (log, recovered) = open(&disk, &config).unwrap();
    assert!(recovered.created);
    assert_eq!(recovered.complete_gci, None);
    assert_eq!(
        log.capacity_bytes(),
        3 * (FILE_BYTES - REDO_FILE_HEADER_BYTES)
    );
    drop(log);
    disk.crash();
    for i in 0..3 {
        let contents = disk.durable_contents(&config.file_path(i)).unwrap();
        assert_eq!(
            contents.len() as u64,
            FILE_BYTES,
            "file {i} is durable at full size"
        );
    }
    assert!(disk.exists(&config.control_path()).unwrap());
    let (_, recovered) = open(&disk, &config).unwrap();
    assert!(!recovered.created);
    assert_eq!(recovered.cut, None);
}

#[test]
fn flushed_gcis_survive_a_crash_and_unflushed_records_are_cut() {
    let disk = SimDisk::new(2);
    nothing_survives_unsynced(&disk);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    let a = log.append(5, b"first").unwrap();
    let b = log.append(5, b"second").unwrap();
    assert!(b > a);
    log.flush(5).unwrap();
    assert_eq!(log.durable_gci(), Some(5));
    log.append(6, b"lost").unwrap();
    log.write_buffered().unwrap();
    disk.crash();
    drop(log);

    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, Some(5));
    assert_eq!(recovered.records, 2);
    assert_eq!(recovered.cut, None, "nothing of gci 6 reached the disk");
    let records = replay_all(&log, &recovered, Gci::MAX);
    assert_eq!(
        records,
        vec![(a.0, 5, b"first".to_vec()), (b.0, 5, b"second".to_vec())]
    );
}

#[test]
fn records_written_but_never_flushed_are_cut_and_reported() {
    let disk = SimDisk::new(3);
    disk.set_crash_policy(CrashPolicy {
        keep_percent: 100,
        tear_percent: 0,
    });
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    log.append(1, b"kept").unwrap();
    log.flush(1).unwrap();
    let head = log.head_lsn();
    log.append(2, b"not flushed").unwrap();
    log.append(2, b"not flushed either").unwrap();
    log.write_buffered().unwrap();
    disk.crash();
    drop(log);

    let (mut log, recovered) = open(&disk, &config).unwrap();
    let cut = recovered.cut.clone().expect("the incomplete gci is cut");
    assert_eq!(cut.cut_at_lsn, head);
    assert_eq!(cut.dropped_records, 2);
    assert!(cut.reason.contains("complete GCI 1"), "{}", cut.reason);
    assert_eq!(
        payloads(&replay_all(&log, &recovered, 9)),
        vec![b"kept".to_vec()]
    );
    // The cut records are overwritten by later appends.
    assert_eq!(log.append(2, b"again").unwrap(), head);
    log.flush(2).unwrap();
    drop(log);
    let (log, recovered) = open(&disk, &config).unwrap();
    let want = vec![b"kept".to_vec(), b"again".to_vec()];
    assert_eq!(payloads(&replay_all(&log, &recovered, 9)), want);
}

#[test]
fn replay_stops_at_the_highest_complete_gci_asked_for() {
    let disk = SimDisk::new(4);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    for gci in 1..=4u32 {
        log.append(gci, &[gci as u8; 10]).unwrap();
        // A record of the next GCI before this one's marker (a commit of
        // gci+1 logged while gci is being flushed).
        log.append(gci + 1, &[gci as u8 + 100; 10]).unwrap();
        log.flush(gci).unwrap();
    }
    drop(log);
    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, Some(4));
    assert_eq!(recovered.oldest_complete_gci(), Some(1));
    assert_eq!(recovered.replay_target(0), None);
    assert_eq!(recovered.replay_target(3), Some(3));
    let gcis = |upto| -> Vec<Gci> {
        replay_all(&log, &recovered, upto)
            .iter()
            .map(|r| r.1)
            .collect()
    };
    assert_eq!(gcis(0), Vec::<Gci>::new());
    assert_eq!(gcis(2), vec![1, 2, 2]);
    assert_eq!(gcis(3), vec![1, 2, 2, 3, 3]);
    assert_eq!(gcis(100), vec![1, 2, 2, 3, 3, 4, 4]);
    assert_eq!(log.replay(&recovered, 100).target_gci(), Some(4));
}

#[test]
fn gcis_reused_after_a_restart_never_revive_records_that_did_not_complete() {
    let disk = SimDisk::new(5);
    nothing_survives_unsynced(&disk);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    log.append(1, b"one").unwrap();
    log.append(2, b"two, never completed").unwrap();
    log.flush(1).unwrap(); // makes the gci-2 record durable too
    disk.crash();
    drop(log);

    // The cluster restarts from gci 1 and uses gci 2 again.
    let (mut log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, Some(1));
    assert_eq!(
        payloads(&replay_all(&log, &recovered, 2)),
        vec![b"one".to_vec()]
    );
    log.append(2, b"two, the real one").unwrap();
    log.flush(2).unwrap();
    drop(log);

    let (log, recovered) = open(&disk, &config).unwrap();
    let want = vec![b"one".to_vec(), b"two, the real one".to_vec()];
    assert_eq!(payloads(&replay_all(&log, &recovered, 2)), want);
}

#[test]
fn full_ring_refuses_appends_until_a_trim_and_wraps_around() {
    let disk = SimDisk::new(6);
    let config = config(3);
    let (mut log, _) = open(&disk, &config).unwrap();
    let record = [7u8; 1000];
    let mut gci = 1;
    let mut lsns = Vec::new();
    let err = loop {
        match log.append(gci, &record) {
            Ok(lsn) => lsns.push(lsn),
            Err(err) => break err,
        }
        if lsns.len() % 10 == 0 {
            log.flush(gci).unwrap();
            gci += 1;
        }
    };
    match &err {
        RedoError::Full {
            part,
            used_bytes,
            capacity_bytes,
        } => {
            assert_eq!(*part, 1);
            assert_eq!(*capacity_bytes, log.capacity_bytes());
            assert!(*used_bytes + 2 * 1032 + 160 > *capacity_bytes);
        }
        other => panic!("expected Full, got {other}"),
    }
    let message = err.to_string();
    assert!(message.contains("local checkpoint"), "{message}");
    assert!(message.contains("FragmentLogFileSize"), "{message}");
    log.flush(gci).unwrap();
    assert!(matches!(
        log.append(gci + 1, &record),
        Err(RedoError::Full { .. })
    ));

    // Laps: trim what a checkpoint would cover, append until full again.
    let mut expected_first = 0;
    while log.head_lsn().0 < 3 * log.capacity_bytes() {
        expected_first = lsns.len() - 20;
        log.trim(lsns[expected_first]).unwrap();
        gci += 1;
        loop {
            match log.append(gci, &record) {
                Ok(lsn) => lsns.push(lsn),
                Err(RedoError::Full { .. }) => break,
                Err(other) => panic!("{other}"),
            }
        }
        log.flush(gci).unwrap();
    }
    let tail = log.tail_lsn();
    drop(log);

    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.tail_lsn, tail);
    assert_eq!(recovered.cut, None);
    let replayed = replay_all(&log, &recovered, Gci::MAX);
    let lsns_replayed: Vec<Lsn> = replayed.iter().map(|r| Lsn(r.0)).collect();
    assert_eq!(lsns_replayed, lsns[expected_first..].to_vec());
}

/// Writes gci 1..=3 with `per_gci` records each, flushed; returns the lsns
/// per gci.
fn three_flushed_gcis(disk: &SimDisk, config: &RedoConfig, per_gci: usize) -> Vec<Vec<Lsn>> {
    let (mut log, _) = open(disk, config).unwrap();
    let mut lsns = Vec::new();
    for gci in 1..=3u32 {
        let mut these = Vec::new();
        for i in 0..per_gci {
            these.push(log.append(gci, &payload(i, 200)).unwrap());
        }
        log.flush(gci).unwrap();
        lsns.push(these);
    }
    lsns
}

#[test]
fn a_flipped_byte_in_the_middle_refuses_to_open_naming_file_and_offset() {
    let disk = SimDisk::new(7);
    let config = config(2);
    let lsns = three_flushed_gcis(&disk, &config, 5);
    let victim = lsns[0][2];
    let (file, offset) = config.locate(victim);
    disk.flip_byte(&config.file_path(file), offset + 40)
        .unwrap();
    disk.crash();
    let err = open(&disk, &config).unwrap_err();
    match &err {
        RedoError::Corrupt {
            path,
            offset: at,
            lsn,
            ..
        } => {
            assert_eq!(path, &config.file_path(file));
            assert_eq!(*at, offset);
            assert_eq!(*lsn, victim);
        }
        other => panic!("expected Corrupt, got {other}"),
    }
    let message = err.to_string();
    assert!(message.contains("redo-part1-0000.log"), "{message}");
    assert!(message.contains(&format!("offset {offset}")), "{message}");
}

#[test]
fn a_flipped_byte_in_a_record_header_in_the_middle_also_refuses() {
    let disk = SimDisk::new(8);
    let config = config(2);
    let lsns = three_flushed_gcis(&disk, &config, 5);
    let (file, offset) = config.locate(lsns[1][0]);
    disk.flip_byte(&config.file_path(file), offset).unwrap(); // the magic
    let err = open(&disk, &config).unwrap_err();
    assert!(
        matches!(err, RedoError::Corrupt { lsn, .. } if lsn == lsns[1][0]),
        "{err}"
    );
}

#[test]
fn a_flipped_byte_at_the_tail_is_cut_and_reported() {
    let disk = SimDisk::new(9);
    let config = config(2);
    let lsns = three_flushed_gcis(&disk, &config, 5);
    // The last flushed batch: nothing written after it proves it durable,
    // so damage there reads as a torn write.
    let victim = lsns[2][3];
    let (file, offset) = config.locate(victim);
    disk.flip_byte(&config.file_path(file), offset + 50)
        .unwrap();
    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, Some(2));
    let cut = recovered.cut.clone().expect("reported");
    assert_eq!(cut.stopped_at_lsn, victim);
    assert_eq!(cut.file, config.file_path(file));
    assert_eq!(cut.offset, offset);
    assert!(cut.reason.contains("checksum"), "{}", cut.reason);
    assert_eq!(cut.dropped_records, 3, "gci 3's records before the damage");
    let gcis: Vec<Gci> = replay_all(&log, &recovered, 3)
        .iter()
        .map(|r| r.1)
        .collect();
    assert_eq!(
        gcis,
        vec![1; 5].into_iter().chain(vec![2; 5]).collect::<Vec<_>>()
    );
}

#[test]
fn a_torn_unflushed_tail_is_cut_and_the_log_goes_on() {
    for seed in 0..20 {
        let disk = SimDisk::new(100 + seed);
        disk.set_crash_policy(CrashPolicy {
            keep_percent: 30,
            tear_percent: 60,
        });
        let config = config(2);
        let (mut log, _) = open(&disk, &config).unwrap();
        for i in 0..10 {
            log.append(1, &payload(i, 300)).unwrap();
        }
        log.flush(1).unwrap();
        for i in 0..30 {
            log.append(2, &payload(i, 300)).unwrap();
            if i % 3 == 0 {
                log.write_buffered().unwrap();
            }
        }
        log.flush(2).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for i in 0..30 {
            log.append(3, &payload(i, 700)).unwrap();
            if i % 4 == 0 {
                log.write_buffered().unwrap();
            }
        }
        disk.crash();
        drop(log);
        let (mut log, recovered) =
            open(&disk, &config).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(recovered.complete_gci, Some(2), "seed {seed}");
        assert_eq!(replay_all(&log, &recovered, 9).len(), 40, "seed {seed}");
        log.append(3, b"after the cut").unwrap();
        log.flush(3).unwrap();
        drop(log);
        let (log, recovered) = open(&disk, &config).unwrap();
        let records = replay_all(&log, &recovered, 9);
        assert_eq!(records.len(), 41, "seed {seed}");
        assert_eq!(records[40].2, b"after the cut");
    }
}

#[test]
fn a_truncated_file_is_cut_at_its_end_or_refused_when_durable_data_follows() {
    // Truncated beyond the head: only free space lost; reported and repaired.
    let disk = SimDisk::new(10);
    let config = config(2);
    three_flushed_gcis(&disk, &config, 5);
    disk.truncate(&config.file_path(1), 8192).unwrap();
    let (log, recovered) = open(&disk, &config).unwrap();
    let cut = recovered.cut.clone().expect("reported");
    assert!(cut.reason.contains("truncated"), "{}", cut.reason);
    assert_eq!(replay_all(&log, &recovered, 9).len(), 15);
    drop(log);
    let len = disk.durable_contents(&config.file_path(1)).unwrap().len() as u64;
    assert_eq!(len, FILE_BYTES, "extended again");
    let (_, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.cut, None);

    // Truncated inside the durable records, with proof after the cut that
    // they were durable: refused.
    let disk = SimDisk::new(11);
    let lsns = three_flushed_gcis(&disk, &config, 100);
    let (file, offset) = config.locate(lsns[0][10]);
    assert_eq!(file, 0);
    let (last_file, _) = config.locate(lsns[2][99]);
    assert_eq!(last_file, 1, "gci 3's marker is in the second file");
    disk.truncate(&config.file_path(0), offset + 40).unwrap();
    let err = open(&disk, &config).unwrap_err();
    assert!(
        matches!(&err, RedoError::Corrupt { lsn, .. } if *lsn == lsns[0][10]),
        "{err}"
    );
    assert!(err.to_string().contains("ends inside"), "{err}");

    // A file cut below its header is refused.
    disk.truncate(&config.file_path(1), 10).unwrap();
    let err = open(&disk, &config).unwrap_err();
    assert!(matches!(err, RedoError::BadFile { .. }), "{err}");
}

#[test]
fn disk_full_during_a_write_is_an_error_and_the_log_goes_on_when_space_returns() {
    let disk = SimDisk::new(12);
    nothing_survives_unsynced(&disk);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    log.append(1, b"before").unwrap();
    log.flush(1).unwrap();
    for i in 0..20 {
        log.append(2, &payload(i, 500)).unwrap();
    }
    disk.fail_writes_after(3000);
    let err = log.flush(2).unwrap_err();
    assert!(
        matches!(&err, RedoError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
        "{err}"
    );
    assert!(err.to_string().contains("redo-part1-0000.log"), "{err}");
    assert_eq!(log.durable_gci(), Some(1));
    assert!(log.write_buffered().is_err());
    disk.allow_writes();
    log.append(3, b"later").unwrap();
    log.flush(2).unwrap();
    log.flush(3).unwrap();
    disk.crash();
    drop(log);
    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, Some(3));
    assert_eq!(replay_all(&log, &recovered, 9).len(), 22);
}

#[test]
fn a_failed_fsync_is_an_error_and_the_part_refuses_work_until_reopened() {
    let disk = SimDisk::new(13);
    nothing_survives_unsynced(&disk);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    log.append(1, b"one").unwrap();
    log.flush(1).unwrap();
    log.append(2, b"two").unwrap();
    disk.fail_next_sync();
    let err = log.flush(2).unwrap_err();
    assert!(matches!(err, RedoError::SyncFailed { .. }), "{err}");
    assert!(err.to_string().contains("restart the node"), "{err}");
    assert_eq!(log.durable_gci(), Some(1));
    let err = log.append(3, b"three").unwrap_err();
    assert!(matches!(err, RedoError::Poisoned { .. }), "{err}");
    assert!(matches!(log.flush(2), Err(RedoError::Poisoned { .. })));
    drop(log);
    disk.crash();
    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, Some(1));
    assert_eq!(
        payloads(&replay_all(&log, &recovered, 9)),
        vec![b"one".to_vec()]
    );
}

/// A flush whose sync runs elsewhere (an io thread): appends and writes
/// of the next GCI go on while it is in flight; its GCI is durable only
/// once it completes, and what a crash before that leaves is at most what
/// the flush before made durable.
#[test]
fn a_flush_in_flight_lets_appends_go_on_and_is_durable_only_once_completed() {
    let disk = SimDisk::new(21);
    nothing_survives_unsynced(&disk);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    log.append(1, b"one").unwrap();
    log.flush(1).unwrap();
    let durable_before = log.durable_lsn();
    log.append(2, b"two").unwrap();
    let sync = log.begin_flush(2).unwrap();
    assert!(sync.files() >= 1);
    assert!(log.flush_in_flight());
    assert_eq!(log.durable_gci(), Some(1), "not durable before the sync");
    assert_eq!(log.durable_lsn(), durable_before);
    // The sync runs on another thread while this one appends and writes.
    let syncing = std::thread::spawn(move || sync.run());
    log.append(3, b"three").unwrap();
    log.write_buffered().unwrap();
    let outcome = syncing.join().unwrap();
    log.complete_flush(outcome).unwrap();
    assert_eq!(log.durable_gci(), Some(2));
    assert!(log.durable_lsn() < log.head_lsn(), "GCI 3 is not durable");
    drop(log);
    assert_eq!(
        after_crash(&disk, &config),
        (Some(2), vec![b"one".to_vec(), b"two".to_vec()])
    );
}

/// A crash while the flush's sync is in flight keeps nothing it did not
/// already make durable (this disk keeps no unsynced write).
#[test]
fn a_crash_before_the_sync_completed_keeps_the_gci_before() {
    let disk = SimDisk::new(22);
    nothing_survives_unsynced(&disk);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    log.append(1, b"one").unwrap();
    log.flush(1).unwrap();
    log.append(2, b"two").unwrap();
    let _sync = log.begin_flush(2).unwrap();
    drop(log);
    assert_eq!(
        after_crash(&disk, &config),
        (Some(1), vec![b"one".to_vec()])
    );
}

/// A sync that fails on the io thread poisons the part at completion.
#[test]
fn a_failed_sync_in_flight_poisons_the_part_at_completion() {
    let disk = SimDisk::new(23);
    let (mut log, _) = open(&disk, &config(2)).unwrap();
    log.append(1, b"one").unwrap();
    let sync = log.begin_flush(1).unwrap();
    disk.fail_next_sync();
    let outcome = sync.run();
    assert!(outcome.is_err());
    let err = log.complete_flush(outcome).unwrap_err();
    assert!(matches!(err, RedoError::SyncFailed { .. }), "{err}");
    assert_eq!(log.durable_gci(), None);
    assert!(matches!(
        log.append(2, b"two"),
        Err(RedoError::Poisoned { .. })
    ));
}

#[test]
fn limits_and_configuration_are_checked() {
    let disk = SimDisk::new(14);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    let big = vec![0u8; REDO_RECORD_PAYLOAD_MAX_BYTES + 1];
    let err = log.append(1, &big).unwrap_err();
    assert!(matches!(err, RedoError::RecordTooLarge { .. }), "{err}");
    log.append(1, &big[1..]).unwrap();
    log.flush(1).unwrap();
    drop(log);

    let bigger = RedoConfig {
        files: 4,
        ..config.clone()
    };
    let err = open(&disk, &bigger).unwrap_err();
    assert!(matches!(err, RedoError::GeometryChanged { .. }), "{err}");
    assert!(err.to_string().contains("initial restart"), "{err}");

    let tiny = RedoConfig {
        file_size_bytes: 4096,
        ..config.clone()
    };
    assert!(matches!(open(&disk, &tiny), Err(RedoError::Config { .. })));

    // Files with records but no control file: refused, not recreated.
    disk.remove_file(&config.control_path()).unwrap();
    let err = open(&disk, &config).unwrap_err();
    assert!(err.to_string().contains("control file"), "{err}");
}

#[test]
fn a_damaged_control_file_is_refused() {
    let disk = SimDisk::new(15);
    let config = config(2);
    drop(open(&disk, &config).unwrap());
    disk.flip_byte(&config.control_path(), 33).unwrap();
    let err = open(&disk, &config).unwrap_err();
    assert!(matches!(err, RedoError::BadFile { .. }), "{err}");
}

// ---------------------------------------------------------------------------
// Format version 1 (older builds)

/// Appends `count` records of `gci` (sizes that make the log skip file ends,
/// some with a pad record) and flushes; returns their payloads.
fn logged(log: &mut RedoLog, gci: Gci, first: usize, count: usize) -> Vec<Vec<u8>> {
    let records: Vec<Vec<u8>> = (first..first + count)
        .map(|i| payload(i, 700 + i * 37 % 900))
        .collect();
    for record in &records {
        log.append(gci, record).unwrap();
    }
    log.flush(gci).unwrap();
    records
}

/// A node upgraded from a build of format 1 restarts on its log without an
/// initial restart: the records of format 1 are recovered and replayed, new
/// ones (format 2) follow them in the same files, and a later restart
/// recovers both, chained across the change of format.
#[test]
fn a_log_of_format_1_is_recovered_and_continued_in_format_2() {
    let disk = SimDisk::new(40);
    let config = config(4);
    let (mut log, _) = open(&disk, &config).unwrap();
    let mut want = Vec::new();
    for gci in 1..=3 {
        want.extend(logged(&mut log, gci, want.len(), 30));
    }
    let old_head = log.head_lsn();
    drop(log);
    let rewritten = redo_format_1::rewrite_as_format_1(&disk, &config, true);
    assert!(rewritten > 90, "records, markers and pads: {rewritten}");
    assert_eq!(redo_format_1::control_version(&disk, &config), 1);
    assert_eq!(&redo_format_1::magic_at(&disk, &config, Lsn(0)), b"SKRL");

    let (mut log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.cut, None, "the whole log of format 1 is taken");
    assert_eq!(recovered.complete_gci, Some(3));
    assert_eq!(recovered.head_lsn, old_head);
    assert_eq!(payloads(&replay_all(&log, &recovered, Gci::MAX)), want);
    assert_eq!(
        redo_format_1::control_version(&disk, &config),
        2,
        "the part is of format 2 before anything of format 2 is appended"
    );
    for gci in 4..=5 {
        want.extend(logged(&mut log, gci, want.len(), 30));
    }
    assert!(
        log.head_lsn().0 > 2 * (FILE_BYTES - REDO_FILE_HEADER_BYTES),
        "records of both formats share files"
    );
    disk.crash();
    drop(log);

    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.cut, None);
    assert_eq!(recovered.complete_gci, Some(5));
    assert_eq!(payloads(&replay_all(&log, &recovered, Gci::MAX)), want);
    assert_eq!(&redo_format_1::magic_at(&disk, &config, Lsn(0)), b"SKRL");
    assert_eq!(&redo_format_1::magic_at(&disk, &config, old_head), b"SKR2");
    let upto_3 = replay_all(&log, &recovered, 3);
    assert_eq!(payloads(&upto_3), want[..90].to_vec());
}

/// A log of format 1 is checked as strictly as one of format 2: a flipped
/// byte in a durable record refuses the open, one in the unflushed tail is
/// cut; and its files without a control file are not recreated.
#[test]
fn damage_to_a_log_of_format_1_is_found_as_in_format_2() {
    let disk = SimDisk::new(41);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    let first = log.head_lsn();
    logged(&mut log, 1, 0, 10);
    logged(&mut log, 2, 10, 10);
    let tail = log.append(3, b"never flushed").unwrap();
    log.write_buffered().unwrap();
    drop(log);
    redo_format_1::rewrite_as_format_1(&disk, &config, true);
    let before = disk.durable_contents(&config.file_path(0)).unwrap();

    let (file, offset) = config.locate(tail);
    disk.flip_byte(&config.file_path(file), offset + 40)
        .unwrap();
    let (log, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, Some(2));
    let cut = recovered.cut.expect("the damaged unflushed record is cut");
    assert!(cut.reason.contains("checksum mismatch"), "{}", cut.reason);
    drop(log);

    // Back to the log as format 1 left it, then damage a record that the
    // marker of GCI 2 shows durable.
    let mut file0 = disk.open(&config.file_path(0), OpenMode::Existing).unwrap();
    file0.write_at(0, &before).unwrap();
    file0.sync().unwrap();
    drop(file0);
    redo_format_1::set_control_version(&disk, &config, 1);
    let (file, offset) = config.locate(first);
    disk.flip_byte(&config.file_path(file), offset + 40)
        .unwrap();
    let err = open(&disk, &config).unwrap_err();
    assert!(matches!(err, RedoError::Corrupt { .. }), "{err}");

    disk.remove_file(&config.control_path()).unwrap();
    let err = open(&disk, &config).unwrap_err();
    assert!(err.to_string().contains("control file"), "{err}");
}

/// Only files created by a build of format 1 hold records of format 1: in
/// a file of format 2 such a record is damage, not the log.
#[test]
fn a_record_of_format_1_in_a_file_of_format_2_is_not_taken() {
    let disk = SimDisk::new(42);
    let config = config(2);
    let (mut log, _) = open(&disk, &config).unwrap();
    logged(&mut log, 1, 0, 5);
    drop(log);
    redo_format_1::rewrite_as_format_1(&disk, &config, false);
    let (_, recovered) = open(&disk, &config).unwrap();
    assert_eq!(recovered.complete_gci, None);
    let cut = recovered.cut.expect("nothing is taken");
    assert!(
        cut.reason
            .contains("a record of format 1 in a file created by format version 2"),
        "{}",
        cut.reason
    );
}

/// Control files of a version this build does not know, and ring files
/// newer than their control file, are refused with what is wrong.
#[test]
fn unknown_and_inconsistent_format_versions_are_refused() {
    let disk = SimDisk::new(43);
    let config = config(2);
    drop(open(&disk, &config).unwrap());
    redo_format_1::set_control_version(&disk, &config, 3);
    let err = open(&disk, &config).unwrap_err();
    assert!(matches!(err, RedoError::BadFile { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("format version 3, this build reads versions 1 to 2"),
        "{err}"
    );
    redo_format_1::set_control_version(&disk, &config, 1);
    let err = open(&disk, &config).unwrap_err();
    assert!(matches!(err, RedoError::BadFile { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("of a format version above the control file's (1)"),
        "{err}"
    );
    redo_format_1::set_control_version(&disk, &config, 2);
    open(&disk, &config).unwrap();
}

// ---------------------------------------------------------------------------
// Real files

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("skarv-redo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn real_config(dir: &Path) -> RedoConfig {
    RedoConfig {
        dir: dir.to_path_buf(),
        part: 0,
        file_size_bytes: FILE_BYTES,
        files: 3,
        earlier_files: None,
    }
}

#[test]
fn real_files_are_created_synced_and_recovered() {
    let tmp = TempDir::new("roundtrip");
    let config = real_config(&tmp.0);
    let (mut log, recovered) = RedoLog::open(Box::new(RealDisk), config.clone()).unwrap();
    assert!(recovered.created);
    for gci in 1..=20u32 {
        for i in 0..20 {
            log.append(gci, &payload(i, 400)).unwrap();
        }
        log.flush(gci).unwrap();
    }
    log.append(21, b"never flushed").unwrap();
    drop(log);
    let len = std::fs::metadata(config.file_path(2)).unwrap().len();
    assert_eq!(len, FILE_BYTES);

    let (log, recovered) = RedoLog::open(Box::new(RealDisk), config.clone()).unwrap();
    assert_eq!(recovered.complete_gci, Some(20));
    assert_eq!(recovered.cut, None);
    let records = replay_all(&log, &recovered, 20);
    assert_eq!(records.len(), 400);
    assert_eq!(records[399].2, payload(19, 400));
}

#[test]
fn real_files_with_a_torn_tail_are_cut() {
    let tmp = TempDir::new("torn");
    let config = real_config(&tmp.0);
    let (mut log, _) = RedoLog::open(Box::new(RealDisk), config.clone()).unwrap();
    log.append(1, b"durable").unwrap();
    log.flush(1).unwrap();
    let head = log.head_lsn();
    log.append(2, &payload(0, 3000)).unwrap();
    log.write_buffered().unwrap();
    drop(log);
    // Tear the unflushed record: garbage over its second half.
    let (file, offset) = config.locate(head);
    let disk = RealDisk;
    let mut f = disk
        .open(&config.file_path(file), OpenMode::Existing)
        .unwrap();
    let at = offset + REDO_RECORD_HEADER_BYTES as u64 + 1500;
    f.write_at(at, &[0xEE; 100]).unwrap();
    drop(f);

    let (log, recovered) = RedoLog::open(Box::new(RealDisk), config.clone()).unwrap();
    let cut = recovered.cut.clone().expect("reported");
    assert_eq!(cut.cut_at_lsn, head);
    assert!(cut.reason.contains("checksum"), "{}", cut.reason);
    assert_eq!(
        payloads(&replay_all(&log, &recovered, 9)),
        vec![b"durable".to_vec()]
    );
}

// ---------------------------------------------------------------------------
// Property: random appends, batches, flushes, trims and crashes

#[derive(Clone, Debug)]
enum Op {
    /// Append to the open GCI, or to the one after it.
    Append {
        later: bool,
        len: usize,
    },
    WriteBuffered,
    Flush,
    /// Trim to one of the durable records (picked by index) or the end.
    Trim {
        pick: usize,
    },
    Crash,
    /// Reopen without a crash (a clean stop).
    Reopen,
    /// The disk fills up after this many more bytes.
    DiskFull {
        after: u16,
    },
    /// Space is back.
    SpaceBack,
    /// A flush whose fsync fails.
    FlushFailingSync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (any::<bool>(), 0..700usize).prop_map(|(later, len)| Op::Append { later, len }),
        1 => (any::<bool>(), 0..20_000usize).prop_map(|(later, len)| Op::Append { later, len }),
        2 => Just(Op::WriteBuffered),
        3 => Just(Op::Flush),
        2 => any::<usize>().prop_map(|pick| Op::Trim { pick }),
        1 => Just(Op::Crash),
        1 => Just(Op::Reopen),
        1 => any::<u16>().prop_map(|after| Op::DiskFull { after }),
        1 => Just(Op::SpaceBack),
        1 => Just(Op::FlushFailingSync),
    ]
}

/// What the log must hold: every record of a flushed GCI not trimmed away.
struct Model {
    /// Appended records that may still be replayed: (lsn, gci, payload).
    records: Vec<(u64, Gci, Vec<u8>)>,
    durable_gci: Option<Gci>,
    /// A flush that failed: its marker may or may not be on disk.
    maybe_gci: Option<Gci>,
    /// Flushed GCIs with the head lsn before their marker: the marker
    /// lies at or after it, so it survives a trim to at most that lsn.
    flushes: Vec<(Gci, u64)>,
    tail: u64,
    /// The head before the failed flush's marker.
    maybe_marker_after: u64,
    /// A trim that failed: the control file may have it.
    maybe_tail: Option<u64>,
}

impl Model {
    /// The lowest GCI appends may use: above every GCI flushed, or
    /// attempted.
    fn open_gci(&self) -> Gci {
        self.maybe_gci.or(self.durable_gci).map_or(1, |g| g + 1)
    }

    /// Records a replay up to `upto` must yield.
    fn expected(&self, upto: Gci) -> Vec<(u64, Gci, Vec<u8>)> {
        self.records
            .iter()
            .filter(|r| r.1 <= upto && r.0 >= self.tail)
            .cloned()
            .collect()
    }

    /// After a restart: records of GCIs that never completed are gone.
    /// A failed flush may have completed its GCI after all.
    fn restart(&mut self, recovered: &Recovered) {
        if self.maybe_tail.take() == Some(recovered.tail_lsn.0) {
            self.tail = recovered.tail_lsn.0;
        }
        if let Some(maybe) = self.maybe_gci.take() {
            if recovered.complete_gci == Some(maybe) {
                self.durable_gci = Some(maybe);
                self.flushes.push((maybe, self.maybe_marker_after));
            }
        }
        let durable = self.durable_gci;
        self.records.retain(|r| Some(r.1) <= durable);
    }
}

/// (lsn, gci, length, checksum) of each record: short enough to print.
fn summary(records: &[(u64, Gci, Vec<u8>)]) -> Vec<(u64, Gci, usize, u32)> {
    records
        .iter()
        .map(|r| (r.0, r.1, r.2.len(), crc32c::crc32c(&r.2)))
        .collect()
}

fn check_recovered(model: &Model, log: &RedoLog, recovered: &Recovered) {
    assert_eq!(recovered.tail_lsn.0, model.tail);
    let surviving: Vec<Gci> = model
        .flushes
        .iter()
        .filter(|f| f.1 >= model.tail)
        .map(|f| f.0)
        .collect();
    match recovered.complete_gci {
        Some(gci) => assert_eq!(Some(gci), model.durable_gci),
        None => assert!(surviving.is_empty(), "markers {surviving:?} lost"),
    }
    if recovered.complete_gci.is_some() {
        let all = replay_all(log, recovered, Gci::MAX);
        assert_eq!(
            summary(&all),
            summary(&model.expected(Gci::MAX)),
            "{recovered:?}"
        );
    }
    // Replays to earlier GCIs whose marker is still in the log.
    for &gci in surviving.iter().rev().take(3) {
        let records = replay_all(log, recovered, gci);
        let want = model.expected(gci);
        assert_eq!(summary(&records), summary(&want), "replay to gci {gci}");
    }
}

fn run(seed: u64, files: u32, policy: CrashPolicy, ops: &[Op]) {
    let disk = SimDisk::new(seed);
    disk.set_crash_policy(policy);
    let config = config(files);
    let (mut log, _) = open(&disk, &config).unwrap();
    let mut model = Model {
        records: Vec::new(),
        durable_gci: None,
        maybe_gci: None,
        flushes: Vec::new(),
        tail: 0,
        maybe_marker_after: 0,
        maybe_tail: None,
    };
    let reopen = |log: RedoLog, model: &mut Model, crash: bool| {
        drop(log);
        disk.clear_faults();
        if crash {
            disk.crash();
        }
        // Either way the node restarts: GCIs that never completed are gone.
        let (log, recovered) = open(&disk, &config).unwrap();
        model.restart(&recovered);
        check_recovered(model, &log, &recovered);
        log
    };
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Append { later, len } => {
                let gci = model.open_gci() + u32::from(later);
                let bytes = payload(step, len);
                match log.append(gci, &bytes) {
                    Ok(lsn) => model.records.push((lsn.0, gci, bytes)),
                    Err(RedoError::Full {
                        used_bytes,
                        capacity_bytes,
                        ..
                    }) => {
                        let size = (REDO_RECORD_HEADER_BYTES + len + 7) as u64 / 8 * 8;
                        assert!(used_bytes + 2 * size + 160 > capacity_bytes, "step {step}");
                    }
                    Err(RedoError::Io { .. }) => {} // disk full on a batch write
                    Err(other) => panic!("step {step}: {other}"),
                }
            }
            Op::WriteBuffered => match log.write_buffered() {
                Ok(()) | Err(RedoError::Io { .. }) => {}
                Err(other) => panic!("step {step}: {other}"),
            },
            Op::Flush | Op::FlushFailingSync => {
                // A retry after a failed flush completes the same GCI.
                let gci = model.maybe_gci.unwrap_or_else(|| model.open_gci());
                let before = log.head_lsn().0;
                if matches!(op, Op::FlushFailingSync) {
                    disk.fail_next_sync();
                }
                match log.flush(gci) {
                    Ok(()) => {
                        if model.maybe_gci.take().is_none() {
                            model.maybe_marker_after = before;
                        }
                        model.durable_gci = Some(gci);
                        model.flushes.push((gci, model.maybe_marker_after));
                        assert_eq!(log.durable_gci(), Some(gci));
                        assert_eq!(log.durable_lsn(), log.head_lsn());
                    }
                    Err(RedoError::Full { .. }) => {}
                    Err(RedoError::Io { .. }) => {
                        if model.maybe_gci.replace(gci).is_none() {
                            model.maybe_marker_after = before;
                        }
                    }
                    Err(RedoError::SyncFailed { .. }) => {
                        if model.maybe_gci.replace(gci).is_none() {
                            model.maybe_marker_after = before;
                        }
                        assert!(matches!(
                            log.append(gci + 1, b"x"),
                            Err(RedoError::Poisoned { .. })
                        ));
                        log = reopen(log, &mut model, false);
                    }
                    Err(other) => panic!("step {step}: {other}"),
                }
            }
            Op::Trim { pick } => {
                let durable = log.durable_lsn().0;
                let mut choices: Vec<u64> = model
                    .records
                    .iter()
                    .map(|r| r.0)
                    .filter(|&lsn| lsn >= model.tail && lsn < durable)
                    .collect();
                choices.push(durable);
                let upto = choices[pick % choices.len()];
                match log.trim(Lsn(upto)) {
                    Ok(()) => (model.tail, model.maybe_tail) = (upto, None),
                    // Disk full or a failed fsync on the control file: the
                    // rename may have happened.
                    Err(RedoError::Io { .. }) => model.maybe_tail = Some(upto),
                    Err(other) => panic!("step {step}: {other}"),
                }
            }
            Op::DiskFull { after } => disk.fail_writes_after(u64::from(after)),
            Op::SpaceBack => disk.allow_writes(),
            Op::Crash => log = reopen(log, &mut model, true),
            Op::Reopen => log = reopen(log, &mut model, false),
        }
    }
    reopen(log, &mut model, true);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        rng_seed: RngSeed::Fixed(0x5EED_0003),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn recovery_replays_exactly_the_flushed_gcis(
        seed in any::<u64>(),
        files in 1..4u32,
        keep_percent in 0..=100u8,
        tear_split in 0..=100u8,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let tear_percent = ((100 - keep_percent) as u16 * tear_split as u16 / 100) as u8;
        run(seed, files, CrashPolicy { keep_percent, tear_percent }, &ops);
    }
}

/// A part an earlier build made with fewer files (before an instance's
/// part counted its share of `NoOfFragmentLogParts`) opens as it was made,
/// keeps working around its ring, and is refused like any other changed
/// geometry when its file count is not the earlier one.
#[test]
fn a_part_of_its_earlier_file_count_opens_as_it_was_made() {
    let disk = SimDisk::new(41);
    let made = config(2);
    let (mut log, _) = open(&disk, &made).unwrap();
    log.append(1, b"before").unwrap();
    log.flush(1).unwrap();
    drop(log);

    let grown = RedoConfig {
        files: 8,
        earlier_files: Some(2),
        ..made.clone()
    };
    let (mut log, recovered) = open(&disk, &grown).unwrap();
    assert_eq!(log.config().files, 2);
    assert_eq!(log.capacity_bytes(), made.capacity_bytes());
    assert!(log.capacity_bytes() < grown.capacity_bytes());
    assert_eq!(
        payloads(&replay_all(&log, &recovered, 1)),
        vec![b"before".to_vec()]
    );
    // Around the two files' ring several times: each GCI's records
    // trimmed once durable, as checkpoints do.
    let record = payload(7, 4000);
    for gci in 2..60 {
        for _ in 0..4 {
            log.append(gci, &record).unwrap();
        }
        log.flush(gci).unwrap();
        let durable = log.durable_lsn();
        log.trim(durable).unwrap();
    }
    log.append(60, b"last").unwrap();
    log.flush(60).unwrap();
    drop(log);
    assert!(
        !disk.exists(&grown.file_path(2)).unwrap(),
        "no file beyond the part's two"
    );

    let (log, recovered) = open(&disk, &grown).unwrap();
    assert_eq!(log.config().files, 2);
    assert_eq!(
        payloads(&replay_all(&log, &recovered, 60)).last(),
        Some(&b"last".to_vec())
    );
    drop(log);

    let other = RedoConfig {
        earlier_files: Some(3),
        ..grown.clone()
    };
    let err = open(&disk, &other).unwrap_err();
    assert!(matches!(err, RedoError::GeometryChanged { .. }), "{err}");

    // A new part takes the configured count.
    let fresh = RedoConfig {
        dir: PathBuf::from("/node/redo-new"),
        ..grown
    };
    let (log, _) = open(&disk, &fresh).unwrap();
    assert_eq!(log.config().files, 8);
    assert_eq!(log.capacity_bytes(), fresh.capacity_bytes());
}
