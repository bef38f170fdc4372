//! Tiny but well-formed binlog files (magic, Format_description, events, optional CRC32),
//! enough for code that reads binlog framing. Layout: MySQL `libbinlogevents` /
//! MariaDB `sql/log_event.h` (19-byte v4 header, little-endian).

pub use vtsnap_core::pitr::binlog::{HEADER_LEN, MAGIC};
pub const QUERY_EVENT: u8 = 2;
/// Write_rows (v2): the bulk of a busy server's binlog.
pub const WRITE_ROWS_EVENT: u8 = 30;
pub const FORMAT_DESCRIPTION_EVENT: u8 = 15;
pub const BINLOG_CHECKPOINT_EVENT: u8 = 161;
pub const START_ENCRYPTION_EVENT: u8 = 164;

/// One event with a v4 header; with `crc`, a CRC32 of the event is appended.
pub fn event(ty: u8, flags: u16, body: &[u8], crc: bool) -> Vec<u8> {
    event_at(0, ty, flags, body, crc)
}

/// [`event`] with its header's `timestamp` (Unix seconds).
pub fn event_at(timestamp: u32, ty: u8, flags: u16, body: &[u8], crc: bool) -> Vec<u8> {
    let size = HEADER_LEN + body.len() + if crc { 4 } else { 0 };
    let mut e = Vec::with_capacity(size);
    e.extend_from_slice(&timestamp.to_le_bytes());
    e.push(ty);
    e.extend_from_slice(&7u32.to_le_bytes());
    e.extend_from_slice(&u32::try_from(size).unwrap().to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes());
    e.extend_from_slice(&flags.to_le_bytes());
    e.extend_from_slice(body);
    if crc {
        let sum = crc32(&e);
        e.extend_from_slice(&sum.to_le_bytes());
    }
    e
}

/// A Format_description event; `in_use` sets LOG_EVENT_BINLOG_IN_USE_F.
pub fn format_description(in_use: bool, crc: bool) -> Vec<u8> {
    let mut body = vec![0u8; 60];
    body.push(u8::from(crc));
    event(FORMAT_DESCRIPTION_EVENT, u16::from(in_use), &body, crc)
}

/// A MariaDB Binlog_checkpoint event naming `file`.
pub fn checkpoint(file: &str, crc: bool) -> Vec<u8> {
    let mut body = u32::try_from(file.len()).unwrap().to_le_bytes().to_vec();
    body.extend_from_slice(file.as_bytes());
    event(BINLOG_CHECKPOINT_EVENT, 0, &body, crc)
}

/// A whole binlog file: FD, then a query and a checkpoint per name in `checkpoints`.
pub fn file(in_use: bool, checkpoints: &[&str]) -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.extend(format_description(in_use, true));
    for c in checkpoints {
        f.extend(event(QUERY_EVENT, 0, b"BEGIN", true));
        f.extend(checkpoint(c, true));
    }
    f
}

/// [`file`], with row events after the Format_description until it holds at least
/// `bytes`, written as it goes (a binlog of gigabytes is never in memory).
pub fn write_padded(
    path: &std::path::Path,
    in_use: bool,
    checkpoints: &[&str],
    bytes: u64,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let head = [MAGIC.to_vec(), format_description(in_use, true)].concat();
    w.write_all(&head)?;
    let mut len = head.len() as u64;
    // One 64 KiB event (its CRC computed once), repeated: the reader sees only framing.
    let filler = event(WRITE_ROWS_EVENT, 0, &[0x5a; 64 * 1024], true);
    let tail: Vec<u8> = checkpoints
        .iter()
        .flat_map(|c| {
            let mut e = event(QUERY_EVENT, 0, b"BEGIN", true);
            e.extend(checkpoint(c, true));
            e
        })
        .collect();
    while len + (tail.len() as u64) < bytes {
        w.write_all(&filler)?;
        len += filler.len() as u64;
    }
    w.write_all(&tail)?;
    w.flush()
}

/// CRC-32 (IEEE), bitwise; slow and obviously correct, for tests.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
    }
}
