//! Checked decoding of ring-buffer bytes into records.

use core::{fmt, mem::size_of, ptr};

use crate::{
    Api, EntryRecord, ExitRecord, LinkMapRecord, PacketRecord, ProcessRecord, QueueRecord,
    RECORD_ENTRY, RECORD_EXIT, RECORD_LINK_MAP, RECORD_PACKET, RECORD_PROCESS, RECORD_QUEUE,
    RECORD_STALL, RECORD_THREAD, RECORD_WAKE, StallRecord, ThreadRecord, WakeRecord,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Entry(EntryRecord),
    Exit(ExitRecord),
    LinkMap(LinkMapRecord),
    Queue(QueueRecord),
    Packet(PacketRecord),
    Process(ProcessRecord),
    /// The call ring is filling: read it now.
    Wake,
    Stall(StallRecord),
    Thread(ThreadRecord),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Short { len: usize },
    UnknownKind(u32),
    WrongSize { kind: u32, len: usize, want: usize },
    UnknownApi(u32),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Short { len } => write!(f, "record of {len} bytes is too short"),
            DecodeError::UnknownKind(k) => write!(f, "unknown record kind {k}"),
            DecodeError::WrongSize { kind, len, want } => {
                write!(f, "record kind {kind} has {len} bytes, expected {want}")
            }
            DecodeError::UnknownApi(a) => write!(f, "unknown API id {a}"),
        }
    }
}

fn read<T: Copy>(bytes: &[u8], kind: u32) -> Result<T, DecodeError> {
    let want = size_of::<T>();
    if bytes.len() != want {
        return Err(DecodeError::WrongSize {
            kind,
            len: bytes.len(),
            want,
        });
    }
    // SAFETY: the length is checked above and every T here is plain old data.
    Ok(unsafe { ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Decodes one ring-buffer item. Rejects anything whose size or ids do not match.
pub fn decode(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    let Some(kind) = bytes.get(..4) else {
        return Err(DecodeError::Short { len: bytes.len() });
    };
    let kind = u32::from_ne_bytes([kind[0], kind[1], kind[2], kind[3]]);
    // An entry's kind carries the ring's losses above its low byte.
    let base = match kind & 0xff {
        RECORD_ENTRY => RECORD_ENTRY,
        _ => kind,
    };
    match base {
        RECORD_ENTRY => {
            let rec: EntryRecord = read(bytes, kind)?;
            let api = u32::from(rec.api);
            Api::from_u32(api).ok_or(DecodeError::UnknownApi(api))?;
            Ok(Decoded::Entry(rec))
        }
        RECORD_EXIT => {
            let rec: ExitRecord = read(bytes, kind)?;
            Api::from_u32(rec.api).ok_or(DecodeError::UnknownApi(rec.api))?;
            Ok(Decoded::Exit(rec))
        }
        RECORD_LINK_MAP => Ok(Decoded::LinkMap(read(bytes, kind)?)),
        RECORD_QUEUE => Ok(Decoded::Queue(read(bytes, kind)?)),
        RECORD_PACKET => Ok(Decoded::Packet(read(bytes, kind)?)),
        RECORD_PROCESS => Ok(Decoded::Process(read(bytes, kind)?)),
        RECORD_WAKE => read::<WakeRecord>(bytes, kind).map(|_| Decoded::Wake),
        RECORD_STALL => Ok(Decoded::Stall(read(bytes, kind)?)),
        RECORD_THREAD => Ok(Decoded::Thread(read(bytes, kind)?)),
        other => Err(DecodeError::UnknownKind(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T>(v: &T) -> &[u8] {
        // SAFETY: reading the bytes of a plain value for the test.
        unsafe { core::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
    }

    #[test]
    fn layouts_are_stable() {
        assert_eq!(size_of::<EntryRecord>(), 56);
        assert_eq!(size_of::<ExitRecord>(), 48);
        assert_eq!(size_of::<LinkMapRecord>(), 24);
        assert_eq!(size_of::<ProcessRecord>(), 24);
        assert_eq!(size_of::<StallRecord>(), 56);
        assert_eq!(size_of::<ThreadRecord>(), 32);
        assert_eq!(size_of::<crate::OutSlot>(), 16);
    }

    #[test]
    fn decodes_entry_and_exit_records() {
        let entry = EntryRecord {
            kind: RECORD_ENTRY,
            pid: 10,
            tid: 11,
            api: Api::HipStreamWaitEvent as u16,
            correlation: 7,
            enter_ns: 100,
            args: [0x1000, 0x2000, 0],
            ..Default::default()
        };
        assert_eq!(decode(bytes_of(&entry)), Ok(Decoded::Entry(entry)));
        let exit = ExitRecord {
            kind: RECORD_EXIT,
            pid: 10,
            tid: 11,
            api: Api::HipStreamWaitEvent as u32,
            exit_ns: 200,
            ret: 101,
            ..Default::default()
        };
        assert_eq!(decode(bytes_of(&exit)), Ok(Decoded::Exit(exit)));
    }

    #[test]
    fn rejects_truncated_unknown_and_corrupt_records() {
        let rec = EntryRecord {
            kind: RECORD_ENTRY,
            api: 3,
            ..Default::default()
        };
        let b = bytes_of(&rec);
        assert_eq!(decode(&b[..2]), Err(DecodeError::Short { len: 2 }));
        assert!(matches!(
            decode(&b[..40]),
            Err(DecodeError::WrongSize { .. })
        ));
        let bad = EntryRecord { api: 999, ..rec };
        assert_eq!(decode(bytes_of(&bad)), Err(DecodeError::UnknownApi(999)));
        let unk = EntryRecord { kind: 77, ..rec };
        assert_eq!(decode(bytes_of(&unk)), Err(DecodeError::UnknownKind(77)));
        let exit = ExitRecord {
            kind: RECORD_EXIT,
            api: 0,
            ..Default::default()
        };
        assert_eq!(decode(bytes_of(&exit)), Err(DecodeError::UnknownApi(0)));
    }

    #[test]
    fn decodes_a_link_map_record() {
        let rec = LinkMapRecord {
            kind: RECORD_LINK_MAP,
            pid: 5,
            tid: 6,
            stopped: 1,
            ns: 9,
        };
        assert_eq!(decode(bytes_of(&rec)), Ok(Decoded::LinkMap(rec)));
    }
}
