//! Tiny but well-formed binlog files (magic, Format_description, events, optional CRC32),
//! enough for code that reads binlog framing. Layout: MySQL `libbinlogevents` /
//! MariaDB `sql/log_event.h` (19-byte v4 header, little-endian).

pub const MAGIC: [u8; 4] = [0xfe, b'b', b'i', b'n'];
pub const HEADER_LEN: usize = 19;
pub const QUERY_EVENT: u8 = 2;
pub const FORMAT_DESCRIPTION_EVENT: u8 = 15;
pub const BINLOG_CHECKPOINT_EVENT: u8 = 161;
pub const START_ENCRYPTION_EVENT: u8 = 164;

/// One event with a v4 header; with `crc`, a CRC32 of the event is appended.
pub fn event(ty: u8, flags: u16, body: &[u8], crc: bool) -> Vec<u8> {
    let size = HEADER_LEN + body.len() + if crc { 4 } else { 0 };
    let mut e = Vec::with_capacity(size);
    e.extend_from_slice(&0u32.to_le_bytes());
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
