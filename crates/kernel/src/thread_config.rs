//! NDB's `ThreadConfig` syntax and the `MaxNoOfExecutionThreads` table,
//! resolved into a [`ThreadLayout`]: the threads a data node starts, which
//! roles each one runs, and how each is bound to CPUs.
//!
//! A data node's thread layout comes from one of three places:
//! - a `ThreadConfig` string ([`ThreadConfig::parse`], then
//!   [`ThreadLayout::from_thread_config`]), which says exactly which threads
//!   to start and how to bind them;
//! - `MaxNoOfExecutionThreads` alone ([`counts_for_max_execution_threads`],
//!   then [`ThreadLayout::from_counts`]), which picks the counts from NDB's
//!   table;
//! - [`ThreadLayout::single_threaded`], NDB's `ndbd`: everything on one thread.
//!
//! The parser follows NDB's rules (`mt_thr_config.cpp`) and refuses what NDB
//! refuses, with a message that names the bad token and what is allowed, so a
//! `config.ini` written for NDB means the same here.

use std::fmt;
use std::str::FromStr;

/// What a thread does (NDB's thread types).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadRole {
    /// Local data manager instances: the data.
    Ldm,
    /// Transaction coordinator instances.
    Tc,
    /// Distribution, dictionary, membership.
    Main,
    /// Subscriptions (change events).
    Rep,
    /// Socket receive.
    Recv,
    /// Socket send.
    Send,
    /// File I/O.
    Io,
    /// Watchdog and socket setup.
    Watchdog,
}

impl ThreadRole {
    /// Every role, in the order a layout lists its threads.
    pub const ALL: [ThreadRole; 8] = [
        ThreadRole::Ldm,
        ThreadRole::Tc,
        ThreadRole::Main,
        ThreadRole::Rep,
        ThreadRole::Recv,
        ThreadRole::Send,
        ThreadRole::Io,
        ThreadRole::Watchdog,
    ];

    /// The role named `name` in `ThreadConfig` (case-insensitive, as in NDB).
    pub fn from_config_name(name: &str) -> Option<ThreadRole> {
        ThreadRole::ALL
            .into_iter()
            .find(|role| role.config_name().eq_ignore_ascii_case(name))
    }

    /// The name used in `ThreadConfig` (`wd` for the watchdog).
    pub fn config_name(self) -> &'static str {
        match self {
            ThreadRole::Ldm => "ldm",
            ThreadRole::Tc => "tc",
            ThreadRole::Main => "main",
            ThreadRole::Rep => "rep",
            ThreadRole::Recv => "recv",
            ThreadRole::Send => "send",
            ThreadRole::Io => "io",
            ThreadRole::Watchdog => "wd",
        }
    }
}

impl fmt::Display for ThreadRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.config_name())
    }
}

/// The longest spin NDB allows (and so do we), in microseconds.
pub const SPINTIME_MAX_US: u32 = 500;

/// How execution threads spin before sleeping (NDB's `SpinMethod`).
///
/// `Static` spins each thread's `spintime` whenever it runs out of work.
/// The others adapt: each thread measures how soon work comes back after
/// it runs out, and spins only as long as the CPU time spent spinning stays
/// within [`SpinMethod::overhead_percent`] of the wake-up latency it saves
/// (`runtime::spin`). Their bound is the thread's `spintime` when
/// ThreadConfig gives one (0 turns spinning off), else
/// [`SpinMethod::default_bound_us`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum SpinMethod {
    /// NDB's default: `spintime` as configured (0 unless given).
    #[default]
    Static,
    CostBased,
    LatencyOptimised,
    DatabaseMachine,
}

impl SpinMethod {
    /// NDB's names, in its order, as `config.ini` spells them.
    pub const NAMES: [&'static str; 4] = [
        "StaticSpinning",
        "CostBasedSpinning",
        "LatencyOptimisedSpinning",
        "DatabaseMachineSpinning",
    ];

    /// Every method, in the order of [`SpinMethod::NAMES`].
    pub const ALL: [SpinMethod; 4] = [
        SpinMethod::Static,
        SpinMethod::CostBased,
        SpinMethod::LatencyOptimised,
        SpinMethod::DatabaseMachine,
    ];

    /// NDB's name of the method.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The method `name` (case-insensitive) names, if any.
    pub fn from_name(name: &str) -> Option<SpinMethod> {
        Self::ALL
            .into_iter()
            .find(|method| method.name().eq_ignore_ascii_case(name))
    }

    pub fn is_adaptive(self) -> bool {
        self != SpinMethod::Static
    }

    /// How much CPU time spinning may cost per unit of latency it saves,
    /// as NDB states it: `1.3 + overhead / 100` units (so 70 allows 2).
    pub fn overhead_percent(self) -> u32 {
        match self {
            SpinMethod::Static => 0,
            SpinMethod::CostBased => 70,
            SpinMethod::LatencyOptimised => 1_000,
            SpinMethod::DatabaseMachine => 10_000,
        }
    }

    /// The longest an adaptive thread spins when ThreadConfig gives it no
    /// `spintime`, in microseconds.
    pub fn default_bound_us(self) -> u32 {
        match self {
            SpinMethod::Static => 0,
            SpinMethod::CostBased | SpinMethod::LatencyOptimised => 100,
            SpinMethod::DatabaseMachine => SPINTIME_MAX_US,
        }
    }
}

impl fmt::Display for SpinMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One thread of the layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadSpec {
    /// e.g. `ldm0`, `tc1`, `main`, `recv0`.
    pub name: String,
    /// The role this thread was configured as.
    pub role: ThreadRole,
    /// Index among the threads of `role` (0-based).
    pub index: u32,
    /// Every role whose blocks run on this thread: `role` itself, plus roles
    /// that have no thread of their own and are folded in (e.g. `tc` on
    /// `main` when there are no tc threads).
    pub hosts: Vec<ThreadRole>,
    /// Pin to exactly this CPU.
    pub cpubind: Option<usize>,
    /// Allowed to run on any of these CPUs.
    pub cpuset: Option<Vec<usize>>,
    pub realtime: bool,
    /// Runs under the OS's batch policy (Linux `SCHED_BATCH`, the
    /// `BatchScheduling` parameter) unless `realtime`: woken by a signal,
    /// it does not preempt the thread on its CPU.
    pub batch: bool,
    /// How long it spins before sleeping, in microseconds: exactly, or as
    /// the bound of an adaptive `spin_method`.
    pub spintime_us: u32,
    /// Whether ThreadConfig gave `spintime_us` (an adaptive method keeps a
    /// given one, 0 included, and otherwise uses its own bound).
    pub spintime_given: bool,
    pub spin_method: SpinMethod,
}

/// Every thread a data node starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadLayout {
    pub threads: Vec<ThreadSpec>,
}

impl ThreadLayout {
    /// Applies `SpinMethod` to every thread that spins: an adaptive method
    /// bounds a thread without a given `spintime` by its own default.
    pub fn set_spin_method(&mut self, method: SpinMethod) {
        for thread in &mut self.threads {
            thread.spin_method = method;
            if method.is_adaptive() && !thread.spintime_given && thread.role.spins() {
                thread.spintime_us = method.default_bound_us();
            }
        }
    }

    /// Applies `BatchScheduling` to every thread.
    pub fn set_batch_scheduling(&mut self, on: bool) {
        for thread in &mut self.threads {
            thread.batch = on;
        }
    }

    /// Number of configured threads of `role` (0 when the role is folded into another thread).
    pub fn count(&self, role: ThreadRole) -> u32 {
        self.threads.iter().filter(|t| t.role == role).count() as u32
    }

    /// The thread that runs instance `instance` of a block of `role`:
    /// instances are spread round-robin over the threads hosting the role.
    /// Returns `None` only for roles no thread hosts.
    pub fn thread_for(&self, role: ThreadRole, instance: u32) -> Option<usize> {
        let hosting: Vec<usize> = self
            .threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.hosts.contains(&role))
            .map(|(i, _)| i)
            .collect();
        if hosting.is_empty() {
            return None;
        }
        Some(hosting[instance as usize % hosting.len()])
    }
}

/// The ldm thread counts NDB allows: partitions and redo log parts are
/// spread evenly over the LDM instances, so only these counts are supported.
///
/// 0 runs one LDM instance on the main thread, beside TC (with no tc
/// threads), distribution and the dictionary: for a data node with one or
/// two CPUs, where a key lookup handed from the TC's thread to an LDM
/// thread and back costs more than the lookup itself (NDB 8.0.23 on allows
/// `ldm=0` too, and runs the LDM in its receive thread, which here is the
/// transporter's own).
pub const LDM_COUNTS_ALLOWED: [u32; 10] = [0, 1, 2, 4, 6, 8, 12, 16, 24, 32];

/// The most tc threads NDB allows (0 folds TC into the main thread).
pub const TC_COUNT_MAX: u32 = 32;

/// The most send threads NDB allows (0: each thread sends for itself).
pub const SEND_COUNT_MAX: u32 = 16;

/// The most recv threads NDB allows.
///
/// 0 (a Skarv extension: NDB's `ndbmtd` always has one) starts no receive
/// thread: the main thread runs the transport's receive loop between its
/// rounds and sleeps in its poll, receiving, executing and sending on one
/// thread as NDB's single-threaded `ndbd` does. For a data node with one or
/// two CPUs, where handing every received batch to another thread costs a
/// wake-up and a context switch per batch.
pub const RECV_COUNT_MAX: u32 = 16;

/// The highest CPU number a `cpubind` or `cpuset` may name: Linux's largest
/// `NR_CPUS` is 8192. It also bounds the memory a range like `0-N` takes.
pub const CPU_ID_MAX: usize = 8191;

impl ThreadRole {
    /// Threads of this role when `ThreadConfig` does not name it (NDB's
    /// minimum counts: tc and send may be absent, everything else runs once).
    fn default_count(self) -> u32 {
        match self {
            ThreadRole::Tc | ThreadRole::Send => 0,
            _ => 1,
        }
    }

    /// Whether `count` threads in total (over every group) is allowed.
    fn count_allowed(self, count: u64) -> bool {
        match self {
            ThreadRole::Ldm => LDM_COUNTS_ALLOWED.iter().any(|&n| u64::from(n) == count),
            ThreadRole::Tc => count <= u64::from(TC_COUNT_MAX),
            ThreadRole::Send => count <= u64::from(SEND_COUNT_MAX),
            ThreadRole::Recv => count <= u64::from(RECV_COUNT_MAX),
            ThreadRole::Main | ThreadRole::Rep | ThreadRole::Io | ThreadRole::Watchdog => {
                count == 1
            }
        }
    }

    /// [`ThreadRole::count_allowed`] in words, for messages.
    fn counts_allowed_text(self) -> &'static str {
        match self {
            ThreadRole::Ldm => "0, 1, 2, 4, 6, 8, 12, 16, 24, 32",
            ThreadRole::Tc => "0..=32",
            ThreadRole::Send => "0..=16",
            ThreadRole::Recv => "0..=16",
            ThreadRole::Main | ThreadRole::Rep | ThreadRole::Io | ThreadRole::Watchdog => "1",
        }
    }

    /// Roles that only ever have one thread, named without an index.
    fn is_single(self) -> bool {
        matches!(
            self,
            ThreadRole::Main | ThreadRole::Rep | ThreadRole::Io | ThreadRole::Watchdog
        )
    }

    /// Whether `spintime` applies: io and wd threads only ever sleep (NDB).
    fn spins(self) -> bool {
        !matches!(self, ThreadRole::Io | ThreadRole::Watchdog)
    }
}

/// One entry of a `ThreadConfig` string: `count` threads of `role` that share
/// the same options. A role may have several groups; their counts add up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadGroup {
    pub role: ThreadRole,
    /// Threads in this group; 1 when the entry does not say.
    pub count: u32,
    /// The k-th thread of the group is bound to the k-th CPU of this list.
    pub cpubind: Option<Vec<usize>>,
    /// Every thread of the group may run on any CPU of this set.
    pub cpuset: Option<Vec<usize>>,
    pub realtime: Option<bool>,
    pub spintime_us: Option<u32>,
}

impl ThreadGroup {
    /// One thread of `role` with no options, as a bare `role` entry means.
    pub fn new(role: ThreadRole) -> ThreadGroup {
        ThreadGroup {
            role,
            count: 1,
            cpubind: None,
            cpuset: None,
            realtime: None,
            spintime_us: None,
        }
    }

    fn has_options(&self) -> bool {
        self.count != 1
            || self.cpubind.is_some()
            || self.cpuset.is_some()
            || self.realtime.is_some()
            || self.spintime_us.is_some()
    }
}

/// A parsed `ThreadConfig`: the groups in the order they were written.
/// Roles it does not name get their default count when it becomes a
/// [`ThreadLayout`] (ldm, main, rep, recv, io, wd: 1; tc, send: 0).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadConfig {
    pub groups: Vec<ThreadGroup>,
}

/// Why a `ThreadConfig` string was refused. Positions are byte offsets into
/// the string, 0-based; entries are numbered from 1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThreadConfigError {
    #[error(
        "ThreadConfig: unknown thread type \"{token}\" at position {position}; \
         allowed: ldm, tc, main, rep, recv, send, io, wd"
    )]
    UnknownRole { token: String, position: usize },
    #[error(
        "ThreadConfig: unknown key \"{token}\" for {role} at position {position}; \
         allowed: count, cpubind, cpuset, realtime, spintime"
    )]
    UnknownKey {
        token: String,
        role: ThreadRole,
        position: usize,
    },
    #[error(
        "ThreadConfig: {key} given twice for {role} at position {position}; \
         allowed: each key once per entry"
    )]
    DuplicateKey {
        key: &'static str,
        role: ThreadRole,
        position: usize,
    },
    #[error("ThreadConfig: expected {expected} at position {position}, found {found}")]
    Syntax {
        expected: &'static str,
        found: String,
        position: usize,
    },
    #[error("ThreadConfig: \"{{\" of {role} at position {position} has no matching \"}}\"")]
    MissingCloseBrace { role: ThreadRole, position: usize },
    #[error(
        "ThreadConfig: {key}={value} for {role} at position {position} is not valid; \
         allowed: {allowed}"
    )]
    BadValue {
        key: &'static str,
        value: String,
        role: ThreadRole,
        position: usize,
        allowed: &'static str,
    },
    #[error(
        "ThreadConfig: bad CPU list item \"{token}\" for {role} at position {position}; \
         allowed: CPU numbers 0..={max} and ranges like 0-3, separated by commas",
        max = CPU_ID_MAX
    )]
    BadCpuList {
        token: String,
        role: ThreadRole,
        position: usize,
    },
    #[error(
        "ThreadConfig: spintime={value} for {role} is too large; allowed 0..={max} (µs)",
        max = SPINTIME_MAX_US
    )]
    SpintimeTooLarge { role: ThreadRole, value: u32 },
    #[error(
        "ThreadConfig: spintime for {role} is not allowed; \
         allowed only for ldm, tc, main, rep, recv, send"
    )]
    SpintimeNotAllowed { role: ThreadRole },
    #[error(
        "ThreadConfig: entry {entry} ({role}) has both cpubind and cpuset; \
         allowed: one of them"
    )]
    BindAndSet { entry: usize, role: ThreadRole },
    #[error(
        "ThreadConfig: entry {entry} ({role}) has {count} thread(s) but cpubind lists \
         {cpus} CPU(s); allowed: at least one CPU per thread"
    )]
    TooFewCpus {
        entry: usize,
        role: ThreadRole,
        count: u32,
        cpus: usize,
    },
    #[error("ThreadConfig: {count} {role} threads; allowed counts: {allowed}")]
    BadCount {
        role: ThreadRole,
        count: u64,
        allowed: &'static str,
    },
}

impl ThreadConfig {
    /// Parses NDB's syntax: comma-separated entries `role` or
    /// `role={key=value,...}`, keys `count`, `cpubind`, `cpuset`, `realtime`
    /// (0/1) and `spintime` (µs). CPU lists are numbers and ranges
    /// (`0-3`, `0,1,2-3`); inside braces an item after a comma that starts
    /// with a digit continues the list. An empty string names nothing, so
    /// every role gets its default count. The result is validated.
    pub fn parse(text: &str) -> Result<ThreadConfig, ThreadConfigError> {
        let mut lexer = Lexer::new(text);
        let mut config = ThreadConfig::default();
        if lexer.peek().kind != TokenKind::End {
            loop {
                config.groups.push(parse_entry(&mut lexer)?);
                let separator = lexer.next();
                match separator.kind {
                    TokenKind::Comma => {}
                    TokenKind::End => break,
                    _ => return Err(syntax("\",\" or the end", separator)),
                }
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks NDB's rules: per entry, not both `cpubind` and `cpuset`, one
    /// bound CPU per thread, `spintime` ≤ [`SPINTIME_MAX_US`] and only on
    /// roles that spin; per role, the total count allowed for it.
    pub fn validate(&self) -> Result<(), ThreadConfigError> {
        for (i, group) in self.groups.iter().enumerate() {
            check_group(i + 1, group)?;
        }
        for role in ThreadRole::ALL {
            let mut groups = self.groups.iter().filter(|g| g.role == role).peekable();
            if groups.peek().is_none() {
                continue;
            }
            let count: u64 = groups.map(|g| u64::from(g.count)).sum();
            if !role.count_allowed(count) {
                return Err(ThreadConfigError::BadCount {
                    role,
                    count,
                    allowed: role.counts_allowed_text(),
                });
            }
        }
        Ok(())
    }

    /// Threads of `role` this configuration starts, defaults included.
    pub fn count(&self, role: ThreadRole) -> u32 {
        let mut groups = self.groups.iter().filter(|g| g.role == role).peekable();
        if groups.peek().is_none() {
            return role.default_count();
        }
        groups.fold(0u32, |sum, g| sum.saturating_add(g.count))
    }
}

impl FromStr for ThreadConfig {
    type Err = ThreadConfigError;

    fn from_str(text: &str) -> Result<ThreadConfig, ThreadConfigError> {
        ThreadConfig::parse(text)
    }
}

/// Writes the configuration back in NDB's syntax; [`ThreadConfig::parse`]
/// reads it back to an equal value.
impl fmt::Display for ThreadConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, group) in self.groups.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(group.role.config_name())?;
            if !group.has_options() {
                continue;
            }
            write!(f, "={{count={}", group.count)?;
            if let Some(cpus) = &group.cpubind {
                write!(f, ",cpubind={}", CpuList(cpus))?;
            }
            if let Some(cpus) = &group.cpuset {
                write!(f, ",cpuset={}", CpuList(cpus))?;
            }
            if let Some(realtime) = group.realtime {
                write!(f, ",realtime={}", u8::from(realtime))?;
            }
            if let Some(spintime_us) = group.spintime_us {
                write!(f, ",spintime={spintime_us}")?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}

/// A CPU list written with runs of consecutive CPUs as ranges.
struct CpuList<'a>(&'a [usize]);

impl fmt::Display for CpuList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = i;
            while end + 1 < self.0.len() && self.0[end + 1] == self.0[end].wrapping_add(1) {
                end += 1;
            }
            if i > 0 {
                f.write_str(",")?;
            }
            if end > i {
                write!(f, "{}-{}", start, self.0[end])?;
            } else {
                write!(f, "{start}")?;
            }
            i = end + 1;
        }
        Ok(())
    }
}

fn check_group(entry: usize, group: &ThreadGroup) -> Result<(), ThreadConfigError> {
    let role = group.role;
    if group.cpubind.is_some() && group.cpuset.is_some() {
        return Err(ThreadConfigError::BindAndSet { entry, role });
    }
    if let Some(value) = group.spintime_us {
        if !role.spins() {
            return Err(ThreadConfigError::SpintimeNotAllowed { role });
        }
        if value > SPINTIME_MAX_US {
            return Err(ThreadConfigError::SpintimeTooLarge { role, value });
        }
    }
    if let Some(cpus) = &group.cpubind {
        if cpus.len() < group.count as usize {
            return Err(ThreadConfigError::TooFewCpus {
                entry,
                role,
                count: group.count,
                cpus: cpus.len(),
            });
        }
    }
    Ok(())
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum TokenKind {
    /// A run of characters other than whitespace and `=,{}`.
    Word,
    Equals,
    Comma,
    Open,
    Close,
    End,
}

#[derive(Copy, Clone, Debug)]
struct Token<'a> {
    kind: TokenKind,
    text: &'a str,
    /// Byte offset of the token in the whole string.
    position: usize,
}

impl Token<'_> {
    fn describe(&self) -> String {
        match self.kind {
            TokenKind::End => "the end".to_string(),
            _ => format!("\"{}\"", self.text),
        }
    }
}

#[derive(Clone)]
struct Lexer<'a> {
    text: &'a str,
    position: usize,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Lexer<'a> {
        Lexer { text, position: 0 }
    }

    fn next(&mut self) -> Token<'a> {
        let rest = &self.text[self.position..];
        let trimmed = rest.trim_start();
        self.position += rest.len() - trimmed.len();
        let start = self.position;
        let kind = match trimmed.chars().next() {
            None => TokenKind::End,
            Some('=') => TokenKind::Equals,
            Some(',') => TokenKind::Comma,
            Some('{') => TokenKind::Open,
            Some('}') => TokenKind::Close,
            Some(_) => TokenKind::Word,
        };
        let len = match kind {
            TokenKind::End => 0,
            TokenKind::Word => trimmed
                .find(|c: char| c.is_whitespace() || "=,{}".contains(c))
                .unwrap_or(trimmed.len()),
            _ => 1,
        };
        self.position += len;
        assert!(self.position <= self.text.len());
        Token {
            kind,
            text: &self.text[start..self.position],
            position: start,
        }
    }

    fn peek(&self) -> Token<'a> {
        self.clone().next()
    }
}

/// The keys of a `role={...}` entry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Key {
    Count,
    Cpubind,
    Cpuset,
    Realtime,
    Spintime,
}

impl Key {
    const ALL: [Key; 5] = [
        Key::Count,
        Key::Cpubind,
        Key::Cpuset,
        Key::Realtime,
        Key::Spintime,
    ];

    fn name(self) -> &'static str {
        match self {
            Key::Count => "count",
            Key::Cpubind => "cpubind",
            Key::Cpuset => "cpuset",
            Key::Realtime => "realtime",
            Key::Spintime => "spintime",
        }
    }

    fn from_name(name: &str) -> Option<Key> {
        Key::ALL
            .into_iter()
            .find(|key| key.name().eq_ignore_ascii_case(name))
    }
}

fn syntax(expected: &'static str, found: Token<'_>) -> ThreadConfigError {
    ThreadConfigError::Syntax {
        expected,
        found: found.describe(),
        position: found.position,
    }
}

/// `role` or `role={...}`.
fn parse_entry(lexer: &mut Lexer<'_>) -> Result<ThreadGroup, ThreadConfigError> {
    let name = lexer.next();
    if name.kind != TokenKind::Word {
        return Err(syntax("a thread type", name));
    }
    let role =
        ThreadRole::from_config_name(name.text).ok_or_else(|| ThreadConfigError::UnknownRole {
            token: name.text.to_string(),
            position: name.position,
        })?;
    let mut group = ThreadGroup::new(role);
    if lexer.peek().kind == TokenKind::Equals {
        lexer.next();
        let open = lexer.next();
        if open.kind != TokenKind::Open {
            return Err(syntax("\"{\"", open));
        }
        parse_options(lexer, &mut group, open.position)?;
    }
    Ok(group)
}

/// The `key=value,...}` after the `{` at `open_position`.
fn parse_options(
    lexer: &mut Lexer<'_>,
    group: &mut ThreadGroup,
    open_position: usize,
) -> Result<(), ThreadConfigError> {
    let role = group.role;
    let unclosed = ThreadConfigError::MissingCloseBrace {
        role,
        position: open_position,
    };
    if lexer.peek().kind == TokenKind::Close {
        lexer.next();
        return Ok(());
    }
    let mut seen: Vec<Key> = Vec::with_capacity(Key::ALL.len());
    loop {
        let key_token = lexer.next();
        match key_token.kind {
            TokenKind::Word => {}
            TokenKind::End => return Err(unclosed),
            _ => return Err(syntax("a key", key_token)),
        }
        let key = Key::from_name(key_token.text).ok_or_else(|| ThreadConfigError::UnknownKey {
            token: key_token.text.to_string(),
            role,
            position: key_token.position,
        })?;
        if seen.contains(&key) {
            return Err(ThreadConfigError::DuplicateKey {
                key: key.name(),
                role,
                position: key_token.position,
            });
        }
        seen.push(key);
        let equals = lexer.next();
        match equals.kind {
            TokenKind::Equals => {}
            TokenKind::End => return Err(unclosed),
            _ => return Err(syntax("\"=\"", equals)),
        }
        let value = lexer.next();
        match value.kind {
            TokenKind::Word => {}
            TokenKind::End => return Err(unclosed),
            _ => return Err(syntax("a value", value)),
        }
        match key {
            Key::Count => group.count = parse_number(key, value, role, "a whole number")?,
            Key::Spintime => {
                group.spintime_us = Some(parse_number(key, value, role, "0..=500 (µs)")?)
            }
            Key::Realtime => group.realtime = Some(parse_realtime(value, role)?),
            Key::Cpubind => group.cpubind = Some(parse_cpu_list(lexer, value, role)?),
            Key::Cpuset => group.cpuset = Some(parse_cpu_list(lexer, value, role)?),
        }
        let separator = lexer.next();
        match separator.kind {
            TokenKind::Comma => {}
            TokenKind::Close => return Ok(()),
            TokenKind::End => return Err(unclosed),
            _ => return Err(syntax("\",\" or \"}\"", separator)),
        }
    }
}

/// A plain decimal number: no sign, no suffix (NDB takes nothing more here).
fn decimal<T: FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn parse_number(
    key: Key,
    value: Token<'_>,
    role: ThreadRole,
    allowed: &'static str,
) -> Result<u32, ThreadConfigError> {
    decimal(value.text).ok_or_else(|| ThreadConfigError::BadValue {
        key: key.name(),
        value: value.text.to_string(),
        role,
        position: value.position,
        allowed,
    })
}

fn parse_realtime(value: Token<'_>, role: ThreadRole) -> Result<bool, ThreadConfigError> {
    match value.text {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(ThreadConfigError::BadValue {
            key: Key::Realtime.name(),
            value: value.text.to_string(),
            role,
            position: value.position,
            allowed: "0 or 1",
        }),
    }
}

/// A CPU list starting with `first`; takes `,item` from the lexer while the
/// item starts with a digit, because inside braces the commas of a CPU list
/// and the commas between keys look the same.
fn parse_cpu_list(
    lexer: &mut Lexer<'_>,
    first: Token<'_>,
    role: ThreadRole,
) -> Result<Vec<usize>, ThreadConfigError> {
    let mut cpus = Vec::new();
    push_cpu_item(&mut cpus, first, role)?;
    loop {
        let mut ahead = lexer.clone();
        if ahead.next().kind != TokenKind::Comma {
            break;
        }
        let item = ahead.next();
        if item.kind != TokenKind::Word || !item.text.starts_with(|c: char| c.is_ascii_digit()) {
            break;
        }
        *lexer = ahead;
        push_cpu_item(&mut cpus, item, role)?;
    }
    Ok(cpus)
}

/// Appends `N` or the range `N-M` (N ≤ M).
fn push_cpu_item(
    cpus: &mut Vec<usize>,
    item: Token<'_>,
    role: ThreadRole,
) -> Result<(), ThreadConfigError> {
    let cpu = |text: &str| decimal::<usize>(text).filter(|&n| n <= CPU_ID_MAX);
    let range = match item.text.split_once('-') {
        Some((low, high)) => cpu(low).zip(cpu(high)),
        None => cpu(item.text).map(|n| (n, n)),
    };
    match range {
        Some((low, high)) if low <= high => {
            cpus.extend(low..=high);
            Ok(())
        }
        _ => Err(ThreadConfigError::BadCpuList {
            token: item.text.to_string(),
            role,
            position: item.position,
        }),
    }
}

/// Thread counts picked by `MaxNoOfExecutionThreads`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ThreadCounts {
    pub ldm: u32,
    pub tc: u32,
    pub send: u32,
    pub recv: u32,
}

/// The largest `MaxNoOfExecutionThreads` the table knows; larger values
/// count as this one.
pub const MAX_NO_OF_EXECUTION_THREADS_MAX: u32 = 72;

/// NDB's table for `MaxNoOfExecutionThreads` 9..=72, copied from
/// `mt_thr_config.cpp`: `(MaxNoOfExecutionThreads, ldm, tc, send, recv)`.
/// The four counts always add up to the value minus two (main and rep).
const EXECUTION_THREADS_TABLE: [(u32, u32, u32, u32, u32); 64] = [
    (9, 4, 2, 0, 1),
    (10, 4, 2, 1, 1),
    (11, 4, 3, 1, 1),
    (12, 6, 2, 1, 1),
    (13, 6, 3, 1, 1),
    (14, 6, 3, 1, 2),
    (15, 6, 3, 2, 2),
    (16, 8, 3, 1, 2),
    (17, 8, 4, 1, 2),
    (18, 8, 4, 2, 2),
    (19, 8, 5, 2, 2),
    (20, 8, 5, 2, 3),
    (21, 8, 5, 3, 3),
    (22, 8, 6, 3, 3),
    (23, 8, 7, 3, 3),
    (24, 12, 5, 2, 3),
    (25, 12, 6, 2, 3),
    (26, 12, 6, 3, 3),
    (27, 12, 7, 3, 3),
    (28, 12, 7, 3, 4),
    (29, 12, 8, 3, 4),
    (30, 12, 8, 4, 4),
    (31, 12, 9, 4, 4),
    (32, 16, 8, 3, 3),
    (33, 16, 8, 3, 4),
    (34, 16, 8, 4, 4),
    (35, 16, 9, 4, 4),
    (36, 16, 10, 4, 4),
    (37, 16, 10, 4, 5),
    (38, 16, 11, 4, 5),
    (39, 16, 11, 5, 5),
    (40, 16, 12, 5, 5),
    (41, 16, 12, 5, 6),
    (42, 16, 13, 5, 6),
    (43, 16, 13, 6, 6),
    (44, 16, 14, 6, 6),
    (45, 16, 14, 6, 7),
    (46, 16, 15, 6, 7),
    (47, 16, 15, 7, 7),
    (48, 24, 12, 5, 5),
    (49, 24, 12, 5, 6),
    (50, 24, 13, 5, 6),
    (51, 24, 13, 6, 6),
    (52, 24, 14, 6, 6),
    (53, 24, 14, 6, 7),
    (54, 24, 15, 6, 7),
    (55, 24, 15, 7, 7),
    (56, 24, 16, 7, 7),
    (57, 24, 16, 7, 8),
    (58, 24, 17, 7, 8),
    (59, 24, 17, 8, 8),
    (60, 24, 18, 8, 8),
    (61, 24, 18, 8, 9),
    (62, 24, 19, 8, 9),
    (63, 24, 19, 9, 9),
    (64, 32, 16, 7, 7),
    (65, 32, 16, 7, 8),
    (66, 32, 17, 7, 8),
    (67, 32, 17, 8, 8),
    (68, 32, 18, 8, 8),
    (69, 32, 18, 8, 9),
    (70, 32, 19, 8, 9),
    (71, 32, 20, 8, 9),
    (72, 32, 20, 8, 10),
];

/// The thread counts NDB picks for `MaxNoOfExecutionThreads = max`: below 9
/// only ldm and recv threads (TC folded into main, no send threads), from 9
/// on NDB's table, above [`MAX_NO_OF_EXECUTION_THREADS_MAX`] as that.
pub fn counts_for_max_execution_threads(max: u32) -> ThreadCounts {
    let small = |ldm| ThreadCounts {
        ldm,
        tc: 0,
        send: 0,
        recv: 1,
    };
    match max {
        0..=3 => small(1),
        4..=6 => small(2),
        7..=8 => small(4),
        _ => {
            let max = max.min(MAX_NO_OF_EXECUTION_THREADS_MAX);
            let (row_max, ldm, tc, send, recv) = EXECUTION_THREADS_TABLE[(max - 9) as usize];
            assert_eq!(row_max, max, "the table has one row per value, in order");
            ThreadCounts {
                ldm,
                tc,
                send,
                recv,
            }
        }
    }
}

impl ThreadLayout {
    /// The threads `cfg` describes, in the order ldm*, tc*, main, rep,
    /// recv*, send*, io, wd. Roles the configuration does not name get their
    /// default count. With no tc threads the main thread hosts TC; with no
    /// ldm threads, one LDM; with no recv threads, the receive loop (Recv);
    /// with no send threads nobody hosts Send (every thread sends for itself).
    ///
    /// # Panics
    /// If `cfg` does not pass [`ThreadConfig::validate`] (a parsed one does).
    pub fn from_thread_config(cfg: &ThreadConfig) -> ThreadLayout {
        if let Err(error) = cfg.validate() {
            panic!("ThreadLayout::from_thread_config needs a valid ThreadConfig: {error}");
        }
        let mut threads = Vec::new();
        for role in ThreadRole::ALL {
            let mut index = 0;
            let mut groups = cfg.groups.iter().filter(|g| g.role == role).peekable();
            if groups.peek().is_none() {
                for _ in 0..role.default_count() {
                    threads.push(plain_thread(role, index));
                    index += 1;
                }
            }
            for group in groups {
                for k in 0..group.count as usize {
                    threads.push(ThreadSpec {
                        cpubind: group.cpubind.as_ref().map(|cpus| cpus[k]),
                        cpuset: group.cpuset.clone(),
                        realtime: group.realtime.unwrap_or(false),
                        spintime_us: group.spintime_us.unwrap_or(0),
                        spintime_given: group.spintime_us.is_some(),
                        ..plain_thread(role, index)
                    });
                    index += 1;
                }
            }
        }
        let mut layout = ThreadLayout { threads };
        if layout.count(ThreadRole::Tc) == 0 {
            layout.main_thread_mut().hosts.push(ThreadRole::Tc);
        }
        if layout.count(ThreadRole::Ldm) == 0 {
            layout.main_thread_mut().hosts.push(ThreadRole::Ldm);
        }
        if layout.count(ThreadRole::Recv) == 0 {
            layout.main_thread_mut().hosts.push(ThreadRole::Recv);
        }
        layout.assert_invariants();
        layout
    }

    /// The layout `MaxNoOfExecutionThreads` gives: `c`'s counts, one main,
    /// rep, io and wd thread, no CPU binding.
    ///
    /// # Panics
    /// If a count is not allowed (see [`ThreadConfig::validate`]); the
    /// counts of [`counts_for_max_execution_threads`] all are.
    pub fn from_counts(c: ThreadCounts) -> ThreadLayout {
        let groups = [
            (ThreadRole::Ldm, c.ldm),
            (ThreadRole::Tc, c.tc),
            (ThreadRole::Recv, c.recv),
            (ThreadRole::Send, c.send),
        ]
        .into_iter()
        .map(|(role, count)| ThreadGroup {
            count,
            ..ThreadGroup::new(role)
        })
        .collect();
        ThreadLayout::from_thread_config(&ThreadConfig { groups })
    }

    /// NDB's single-threaded `ndbd`: one thread, `main`, runs every block
    /// (ldm, tc, main, rep, recv, send), beside the io and wd threads.
    pub fn single_threaded() -> ThreadLayout {
        let main = ThreadSpec {
            hosts: vec![
                ThreadRole::Ldm,
                ThreadRole::Tc,
                ThreadRole::Main,
                ThreadRole::Rep,
                ThreadRole::Recv,
                ThreadRole::Send,
            ],
            ..plain_thread(ThreadRole::Main, 0)
        };
        let layout = ThreadLayout {
            threads: vec![
                main,
                plain_thread(ThreadRole::Io, 0),
                plain_thread(ThreadRole::Watchdog, 0),
            ],
        };
        layout.assert_invariants();
        layout
    }

    fn main_thread_mut(&mut self) -> &mut ThreadSpec {
        self.threads
            .iter_mut()
            .find(|t| t.role == ThreadRole::Main)
            .expect("every layout has a main thread")
    }

    /// What the runtime relies on: one main, io and wd thread; every role
    /// but Send hosted somewhere; unique names; indexes 0.. per role.
    fn assert_invariants(&self) {
        for role in [ThreadRole::Main, ThreadRole::Io, ThreadRole::Watchdog] {
            assert_eq!(self.count(role), 1, "exactly one {role} thread");
        }
        for role in ThreadRole::ALL {
            if role != ThreadRole::Send {
                assert!(self.thread_for(role, 0).is_some(), "no thread hosts {role}");
            }
            let threads = self.threads.iter().filter(|t| t.role == role);
            assert!(threads.enumerate().all(|(i, t)| t.index as usize == i));
        }
        for (i, thread) in self.threads.iter().enumerate() {
            assert!(
                thread.hosts.contains(&thread.role),
                "{} hosts its own role",
                thread.name
            );
            assert!(thread.spintime_us <= SPINTIME_MAX_US);
            assert!(
                self.threads[..i].iter().all(|t| t.name != thread.name),
                "thread name {} is used twice",
                thread.name
            );
        }
    }
}

/// Thread `index` of `role` hosting only its role, with default options.
fn plain_thread(role: ThreadRole, index: u32) -> ThreadSpec {
    let name = if role.is_single() {
        assert_eq!(index, 0, "{role} has a single thread");
        role.config_name().to_string()
    } else {
        format!("{}{}", role.config_name(), index)
    };
    ThreadSpec {
        name,
        role,
        index,
        hosts: vec![role],
        cpubind: None,
        cpuset: None,
        realtime: false,
        batch: false,
        spintime_us: 0,
        spintime_given: false,
        spin_method: SpinMethod::Static,
    }
}
