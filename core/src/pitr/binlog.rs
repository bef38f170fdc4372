//! The event headers of a MySQL binlog file, walked without reading the events' bodies:
//! enough to know when the last transaction a `--stop-datetime` replay applies began, for
//! the recovery's RPO (docs/pitr.md §4). The file is hostile: every size is checked.
//!
//! Layout (binlog format v4; MySQL `libs/mysql/binlog/event/binlog_event.h`): the four
//! magic bytes, then events, each with a 19-byte header: `timestamp` (u32 LE, seconds,
//! offset 0), `type` (u8, 4), `server_id` (u32, 5), `event_size` (u32 LE, 9: the whole
//! event, header included), `log_pos` (u32, 13), `flags` (u16, 17).

use std::io::{self, Read};

/// Every binlog file starts with these four bytes (MySQL `BINLOG_MAGIC`).
pub const MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];
/// The v4 event header's length (`LOG_EVENT_HEADER_LEN`).
pub const HEADER_LEN: usize = 19;
const HEADER_BYTES: u32 = HEADER_LEN as u32;
/// Event types that begin a transaction: `GTID_LOG_EVENT`, `ANONYMOUS_GTID_LOG_EVENT`,
/// `GTID_TAGGED_LOG_EVENT` (MySQL 8.3+).
pub const TRANSACTION_STARTS: [u8; 3] = [33, 34, 42];

#[derive(Debug, thiserror::Error)]
pub enum BinlogError {
    #[error("not a binlog: no binlog magic at its start")]
    NoMagic,
    #[error("event {index} is cut short (a header or body ends before its size)")]
    Truncated { index: u64 },
    #[error("event {index} claims {size} bytes, less than its own 19-byte header")]
    BadSize { index: u64, size: u32 },
    #[error("cannot be read: {0}")]
    Read(#[from] io::Error),
}

/// What a walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Walked {
    /// Events before the stop (or all of them).
    pub events: u64,
    /// When the last transaction before the stop began (its GTID event's timestamp).
    pub last_transaction: Option<u32>,
}

/// Walks `r` as `mysqlbinlog --stop-datetime` reads it: up to the first event whose
/// timestamp is at or after `stop` (all of it without one).
pub fn walk(mut r: impl Read, stop: Option<u32>) -> Result<Walked, BinlogError> {
    let mut magic = [0_u8; 4];
    r.read_exact(&mut magic).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => BinlogError::NoMagic,
        _ => BinlogError::Read(e),
    })?;
    if magic != MAGIC {
        return Err(BinlogError::NoMagic);
    }
    let mut walked = Walked::default();
    loop {
        let index = walked.events;
        let mut header = [0_u8; HEADER_LEN];
        match read_or_end(&mut r, &mut header)? {
            Filled::End => return Ok(walked),
            Filled::Part => return Err(BinlogError::Truncated { index }),
            Filled::Whole => {}
        }
        let timestamp = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let kind = header[4];
        let size = u32::from_le_bytes([header[9], header[10], header[11], header[12]]);
        if size < HEADER_BYTES {
            return Err(BinlogError::BadSize { index, size });
        }
        if stop.is_some_and(|s| timestamp >= s) {
            return Ok(walked);
        }
        let body = u64::from(size - HEADER_BYTES);
        if io::copy(&mut (&mut r).take(body), &mut io::sink())? < body {
            return Err(BinlogError::Truncated { index });
        }
        walked.events += 1;
        if TRANSACTION_STARTS.contains(&kind) {
            walked.last_transaction = Some(timestamp);
        }
    }
}

enum Filled {
    End,
    Part,
    Whole,
}

/// Fills `buf`, telling a clean end (nothing read) from a cut one; `read_to_end` retries
/// what a signal interrupts.
fn read_or_end(r: &mut impl Read, buf: &mut [u8]) -> Result<Filled, io::Error> {
    let mut got = Vec::with_capacity(buf.len());
    r.take(buf.len() as u64).read_to_end(&mut got)?;
    Ok(match got.len() {
        0 => Filled::End,
        n if n < buf.len() => Filled::Part,
        _ => {
            buf.copy_from_slice(&got);
            Filled::Whole
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event: a header with `timestamp`, `kind` and a body of `body` bytes.
    pub(crate) fn event(timestamp: u32, kind: u8, body: usize) -> Vec<u8> {
        let size = u32::try_from(body + HEADER_LEN).unwrap();
        let mut e = Vec::new();
        e.extend(timestamp.to_le_bytes());
        e.push(kind);
        e.extend(1_u32.to_le_bytes());
        e.extend(size.to_le_bytes());
        e.extend(0_u32.to_le_bytes());
        e.extend(0_u16.to_le_bytes());
        e.extend(std::iter::repeat_n(0xab, body));
        e
    }

    fn file(events: &[Vec<u8>]) -> Vec<u8> {
        let mut f = MAGIC.to_vec();
        for e in events {
            f.extend(e);
        }
        f
    }

    /// A format description, then transactions (GTID, query, rows, XID) at `times`.
    fn binlog(times: &[u32]) -> Vec<u8> {
        let mut events = vec![event(100, 15, 100), event(100, 35, 31)];
        for &t in times {
            events.extend([
                event(t, 33, 60),
                event(t, 2, 40),
                event(t, 30, 80),
                event(t, 16, 12),
            ]);
        }
        file(&events)
    }

    #[test]
    fn the_last_transaction_is_the_last_gtid_event_before_the_stop() {
        let f = binlog(&[1000, 1001, 1003]);
        let all = walk(f.as_slice(), None).unwrap();
        assert_eq!(all.last_transaction, Some(1003));
        assert_eq!(all.events, 14);
        // Exclusive, at whole seconds: a stop at 1003 leaves 1003's transaction out.
        let before = walk(f.as_slice(), Some(1003)).unwrap();
        assert_eq!(before.last_transaction, Some(1001));
        assert_eq!(before.events, 10);
        assert_eq!(
            walk(f.as_slice(), Some(1002)).unwrap().last_transaction,
            Some(1001)
        );
        // A stop before every transaction applies none of them.
        assert_eq!(
            walk(f.as_slice(), Some(1000)).unwrap().last_transaction,
            None
        );
        // mysqlbinlog stops at the first event at or after the stop, even if a later one
        // (a clock step back) is earlier.
        let stepped = binlog(&[1000, 1005, 1001]);
        assert_eq!(
            walk(stepped.as_slice(), Some(1003))
                .unwrap()
                .last_transaction,
            Some(1000)
        );
        assert_eq!(
            walk(binlog(&[]).as_slice(), None).unwrap().last_transaction,
            None
        );
        // An event may be its header alone (a STOP_EVENT with no checksum).
        let bare = walk(
            file(&[event(100, 15, 10), event(101, 3, 0)]).as_slice(),
            None,
        );
        assert_eq!(bare.unwrap().events, 2);
    }

    #[test]
    fn a_damaged_file_is_an_error_never_a_shorter_walk() {
        let f = binlog(&[1000, 1001]);
        for cut in [f.len() - 1, f.len() - 12, 4 + 5] {
            assert!(
                matches!(walk(&f[..cut], None), Err(BinlogError::Truncated { .. })),
                "cut at {cut}"
            );
        }
        assert!(matches!(walk(&f[..2], None), Err(BinlogError::NoMagic)));
        let mut wrong = f.clone();
        wrong[0] = 0;
        assert!(matches!(
            walk(wrong.as_slice(), None),
            Err(BinlogError::NoMagic)
        ));
        // A size smaller than the header would loop or go back: refused, with its index.
        let mut small = file(&[event(100, 15, 10)]);
        small[4 + 9..4 + 13].copy_from_slice(&18_u32.to_le_bytes());
        assert!(matches!(
            walk(small.as_slice(), None),
            Err(BinlogError::BadSize { index: 0, size: 18 })
        ));
        // A size past the end is cut short, not read past.
        let mut huge = file(&[event(100, 15, 10)]);
        huge[4 + 9..4 + 13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            walk(huge.as_slice(), None),
            Err(BinlogError::Truncated { index: 0 })
        ));
    }
}
