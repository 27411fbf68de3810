//! The subscription's `resolve_copy` (docs/events.md, "A copying
//! ALTER"), against a data node stand-in on loopback: a change of a
//! table the subscription does not have, with no `REPLACE` entry before
//! it, as a node restarted after a copy's swap sends it. The stand-in
//! answers the hello, the registration, the dictionary (the subscribed
//! table `t`, id 20; once the test swaps the copy in, `t` is id 30, which
//! replaces 20) and `SubStartReq`; the test then sends one epoch holding
//! an insert of table 30. The subscription must find the copy under the
//! subscribed table's name and hand the insert out under it. Real
//! processes cannot make that order on demand (a restarted node's part
//! overtaking the survivors' entry), which is why this stand-in exists.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use signal::{
    encode_frame, sub_change, BlockNumber, BlockRef, DictTableGroup, NodeId, Signal, SignalBody,
};
use skarv_client::schema_types::TableDef;
use skarv_client::{ChangeKind, Cluster, ClusterOptions, Event, SubscribeOptions, Value};

mod standin;
use standin::{greet, kv_table_def, read_frame, registered, start_standin, Standin};

const DATA_NODE: u8 = 2;
/// The subscribed table's id, and its copy's.
const TABLE_ID: u32 = 20;
const COPY_ID: u32 = 30;
/// How long the test waits for the epoch at most.
const WAIT: Duration = Duration::from_secs(10);

/// `t` as the dictionary holds it: the table, or (`copy`) the copy that
/// replaces it.
fn table_def(copy: bool) -> TableDef {
    let mut def = kv_table_def("t", if copy { COPY_ID } else { TABLE_ID });
    if copy {
        def.replaces = TABLE_ID;
    }
    def
}

/// What the stand-in and the test share.
#[derive(Default)]
struct Shared {
    /// The copy has taken `t`'s name.
    swapped: AtomicBool,
    /// The connection to the client, to send it the epoch.
    stream: Mutex<Option<TcpStream>>,
    /// The subscription: its block and id, once it asked.
    subscriber: Mutex<Option<(BlockRef, u32)>>,
}

fn answer(signal: &Signal, shared: &Shared) -> Option<SignalBody> {
    match &signal.body {
        SignalBody::ApiRegReq { .. } => Some(registered()),
        SignalBody::DictGetTableReq {
            request_id,
            table_id,
            name,
        } => {
            let def = table_def(shared.swapped.load(Ordering::SeqCst));
            Some(if name == "t" || *table_id == def.id {
                SignalBody::DictGetTableConf {
                    request_id: *request_id,
                    group: DictTableGroup {
                        tables: vec![def.to_bytes()],
                    },
                }
            } else {
                SignalBody::DictGetTableRef {
                    request_id: *request_id,
                    code: 723,
                    message: format!("no table `{name}` (id {table_id})"),
                }
            })
        }
        SignalBody::SubStartReq { sub_id, .. } => {
            *shared.subscriber.lock().unwrap() = Some((signal.sender, *sub_id));
            Some(SignalBody::SubStartConf {
                sub_id: *sub_id,
                start_epoch: signal::epoch::make(5, 0),
                incarnation: 1,
            })
        }
        _ => None,
    }
}

fn me() -> NodeId {
    NodeId::new(DATA_NODE).expect("id")
}

fn send(stream: &mut TcpStream, signal: Signal) {
    let mut out = Vec::new();
    encode_frame(&[signal], &mut out).expect("encodes");
    stream.write_all(&out).expect("sent");
}

fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buffer = Vec::new();
    if greet(&mut stream, &mut buffer, me()).is_none() {
        return;
    }
    *shared.stream.lock().unwrap() = Some(stream.try_clone().expect("clone"));
    while let Some(signals) = read_frame(&mut stream, &mut buffer) {
        for signal in signals {
            if let Some(body) = answer(&signal, &shared) {
                let reply = Signal {
                    receiver: signal.sender,
                    sender: BlockRef::new(me(), signal.receiver.block, 0),
                    body,
                };
                let mut guard = shared.stream.lock().unwrap();
                send(guard.as_mut().expect("connected"), reply);
            }
        }
    }
}

struct Setup {
    standin: Standin,
    shared: Arc<Shared>,
}

fn setup() -> Setup {
    let shared = Arc::new(Shared::default());
    let serving = Arc::clone(&shared);
    let standin = start_standin("resolve", DATA_NODE, &[10, 11], move |stream| {
        serve(stream, Arc::clone(&serving))
    });
    Setup { standin, shared }
}

#[test]
fn a_copys_change_before_its_replace_entry_is_found_by_the_tables_name() {
    let setup = setup();
    let options = ClusterOptions {
        connect_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(&setup.standin.connect, options).expect("connect");
    let session = cluster.session().expect("session");
    let mut sub = session
        .subscribe(&["t"], SubscribeOptions::default())
        .expect("subscribe");
    let (to, sub_id) = setup.shared.subscriber.lock().unwrap().expect("subscribed");

    // The copy takes `t`'s name; its first change comes with no entry.
    setup.shared.swapped.store(true, Ordering::SeqCst);
    let copy = table_def(true);
    let layout = schema::RowLayout::new(&copy);
    let (mut fixed, mut var) = (Vec::new(), Vec::new());
    layout
        .encode(&[Value::Int(1), Value::Int(10)], &mut fixed, &mut var)
        .expect("a row");
    fixed.extend_from_slice(&var);
    let mut changes = Vec::new();
    sub_change::push(
        &mut changes,
        &sub_change::Entry {
            kind: sub_change::INSERT,
            flags: 0,
            table: COPY_ID,
            version: copy.version,
            partition: 0,
            before: &[],
            after: &fixed,
        },
    );
    let epoch = signal::epoch::make(6, 0);
    let data = Signal {
        receiver: to,
        sender: BlockRef::new(me(), BlockNumber::SUBSCRIPTION, 0),
        body: SignalBody::SubEpochData {
            sub_id,
            epoch,
            bucket: me(),
            count: 1,
            changes,
            complete: true,
        },
    };
    send(
        setup
            .shared
            .stream
            .lock()
            .unwrap()
            .as_mut()
            .expect("connected"),
        data,
    );

    let deadline = Instant::now() + WAIT;
    let got = loop {
        assert!(Instant::now() < deadline, "no epoch in {WAIT:?}");
        if let Some(Event::Epoch(e)) = sub.next_timeout(Duration::from_millis(100)).expect("next") {
            if e.epoch.get() == epoch {
                break e;
            }
        }
    };
    assert_eq!(got.changes.len(), 1, "the copy's insert: {got:?}");
    let change = &got.changes[0];
    assert_eq!((change.table, change.kind), ("t", ChangeKind::Insert));
    assert_eq!(
        change.after.as_deref(),
        Some(&[("k", Value::Int(1)), ("v", Value::Int(10))][..]),
        "{change:?}"
    );
}
