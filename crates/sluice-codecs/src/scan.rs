//! Baseline JPEG scans made ready for parallel entropy decoding (on a GPU).
//!
//! Huffman decoding is the one step of a JPEG decode that looks serial: a codeword's start
//! is known only once the one before it is decoded. It is not, in practice: Huffman codes
//! resynchronise. Cut the scan into chunks of bits, one per thread, and let every thread
//! decode its chunk from a guessed state; after a few dozen codewords a guess almost always
//! falls onto the true codeword boundaries. Then every thread re-decodes from the state its
//! predecessor ended in, until no thread's end state changes (thread 0 starts from the true
//! state, so each round makes at least one more thread right: the fixpoint is exact, and
//! in practice it takes one or two rounds). With the chunks' block counts summed in order,
//! each thread knows which block it writes, and a prefix sum per component turns the DC
//! differences into values. (Weißenberger and Schmidt, "Massively Parallel Huffman Decoding
//! on GPUs", ICPP 2018, describe the same self-synchronisation.)
//!
//! This module does the host's part: [`prepare_scan`] checks that a file is a single-scan
//! baseline JPEG without restart markers, derives its Huffman tables in the form the decoder
//! reads ([`ScanHeader`], laid out for the GPU kernel `jpeg_entropy.cu`) and copies the
//! entropy-coded bytes with the stuffing removed. [`decode_parallel`] is the same algorithm
//! on the CPU, thread by thread: the kernel's specification, and what the tests compare with
//! libjpeg-turbo's own coefficients ([`crate::read_coefficients`]).

use crate::coefficients::CoefLayout;
use crate::exif;

/// Bits the decoder's first lookup reads (codes up to this long take one step).
pub const LOOKAHEAD_BITS: u32 = 9;

/// Bytes of 0xFF after the scan data, so the decoder may read 32 bits past any position it
/// decodes from (as the standard's padding does, all ones, which no code uses).
pub const SCAN_PADDING: usize = 16;

/// One Huffman table as the parallel decoder reads it (libjpeg's derived table, jdhuff.c).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HuffTable {
    /// For the next `LOOKAHEAD_BITS` bits: code length << 8 | symbol, 0 when the code is longer.
    pub lookup: [u16; 1 << LOOKAHEAD_BITS],
    /// Largest code of each length (index = length, 1..=16), -1 where there is none; 17 is a
    /// sentinel larger than any code.
    pub maxcode: [i32; 18],
    /// For each length: the index in `values` of its first code, minus that code.
    pub valoffset: [i32; 18],
    pub values: [u8; 256],
}

impl HuffTable {
    /// No codes: what a table the file does not define reads as.
    const EMPTY: HuffTable = HuffTable { lookup: [0; 1 << LOOKAHEAD_BITS], maxcode: [-1; 18], valoffset: [0; 18], values: [0; 256] };
}

/// Most blocks in one MCU of a baseline scan (the standard's limit).
pub const MAX_MCU_BLOCKS: usize = 10;

/// Everything the parallel decoder needs to know about one scan, laid out for the GPU
/// (`struct ScanHeader` in jpeg_entropy.cu mirrors it field by field).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ScanHeader {
    /// DC tables 0 and 1, then AC tables 0 and 1 (zeroed where the file has none).
    pub tables: [HuffTable; 4],
    pub mcus_per_row: u32,
    pub mcu_rows: u32,
    pub blocks_per_mcu: u32,
    /// Bytes of entropy-coded data (stuffing removed), before the padding.
    pub data_bytes: u32,
    /// Per block of an MCU: its component, DC table (0 or 1), AC table (2 or 3), and column
    /// and row inside the component's part of the MCU.
    pub block_comp: [u8; MAX_MCU_BLOCKS],
    pub block_dc: [u8; MAX_MCU_BLOCKS],
    pub block_ac: [u8; MAX_MCU_BLOCKS],
    pub block_x: [u8; MAX_MCU_BLOCKS],
    pub block_y: [u8; MAX_MCU_BLOCKS],
    /// Blocks across and down one MCU, per component (its sampling factors; 1 x 1 when the
    /// scan has one component).
    pub comp_h: [u8; 3],
    pub comp_v: [u8; 3],
    pub _pad: [u8; 8],
}

const _: () = assert!(std::mem::size_of::<HuffTable>() == 1424);
const _: () = assert!(std::mem::size_of::<ScanHeader>() == 4 * 1424 + 16 + 5 * MAX_MCU_BLOCKS + 14);
const _: () = assert!(std::mem::size_of::<ScanHeader>().is_multiple_of(8));

impl ScanHeader {
    /// The header's bytes, as the GPU reads them.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: plain old data with no padding the compiler inserts (sizes asserted above).
        unsafe { std::slice::from_raw_parts(self as *const ScanHeader as *const u8, std::mem::size_of::<ScanHeader>()) }
    }

    /// Blocks in the whole scan.
    pub fn total_blocks(&self) -> u64 {
        u64::from(self.mcus_per_row) * u64::from(self.mcu_rows) * u64::from(self.blocks_per_mcu)
    }
}

/// Room [`prepare_scan`] needs for the data of a file of `file_len` bytes: the scan is
/// never longer than the file.
pub fn scan_room(file_len: usize) -> usize {
    (file_len + SCAN_PADDING).next_multiple_of(8)
}

/// A scan made ready: its header, and the quantization table of each component (natural
/// order) for whoever finishes the decode.
pub struct PreparedScan {
    pub header: Box<ScanHeader>,
    pub quant: [[u16; 64]; 3],
    /// Bytes written to the data buffer, padding included.
    pub written: usize,
}

fn be16(b: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]) as usize)
}

/// Derives a table from the DHT's code counts and symbols, as jpeg_make_d_derived_tbl;
/// None for a table no valid stream can use (too many codes for their lengths).
fn derive_table(counts: &[u8; 16], values: &[u8]) -> Option<HuffTable> {
    let mut t = HuffTable::EMPTY;
    t.values[..values.len()].copy_from_slice(values);
    let (mut code, mut p) = (0i32, 0usize);
    for len in 1..=16usize {
        let n = counts[len - 1] as usize;
        if n > 0 {
            t.valoffset[len] = p as i32 - code;
            for _ in 0..n {
                // Codes of one length must fit in that many bits, the all-ones code unused:
                // checked before the code is used (a table declaring more codes of a length
                // than fit would index past the lookup table).
                if code >= (1 << len) - 1 {
                    return None;
                }
                if len <= LOOKAHEAD_BITS as usize {
                    let shift = LOOKAHEAD_BITS as usize - len;
                    let first = (code as usize) << shift;
                    for e in &mut t.lookup[first..first + (1 << shift)] {
                        *e = (len << 8 | values[p] as usize) as u16;
                    }
                }
                code += 1;
                p += 1;
            }
            t.maxcode[len] = code - 1;
        }
        code <<= 1;
    }
    t.maxcode[17] = i32::MAX;
    Some(t)
}

/// Zigzag position -> natural (row-major) position.
pub const ZIGZAG_TO_NATURAL: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42,
    49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// Whether the file declares a restart interval (a DRI marker with a non-zero interval
/// before its first scan), which [`prepare_scan`] refuses: one walk over the markers, no copy.
pub fn has_restart_interval(bytes: &[u8]) -> bool {
    exif::scan_jpeg(bytes).restart_interval != 0
}

/// Reads the header of a single-scan baseline (SOF0) 8-bit JPEG with one or three components
/// and no restart markers, and copies its entropy-coded data, stuffing removed and padded
/// with [`SCAN_PADDING`] bytes of 0xFF, to the start of `data` (at least
/// [`scan_room`]`(bytes.len())` long). None for anything else (the caller decodes it another
/// way): progressive or extended files, restart intervals, a second scan, tables missing.
pub fn prepare_scan(bytes: &[u8], data: &mut [u8]) -> Option<PreparedScan> {
    if bytes.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut dht: [Option<HuffTable>; 4] = [None; 4];
    let mut dqt = [[0u16; 64]; 4];
    let mut dqt_seen = [false; 4];
    // (id, h, v, tq) per component of the frame.
    let mut frame: Vec<(u8, u8, u8, u8)> = Vec::new();
    let (mut width, mut height) = (0usize, 0usize);
    let mut scan = None;
    for segment in exif::segments(bytes) {
        let (marker, seg) = (segment.marker, segment.data);
        match marker {
            0xC0 => {
                if seg.len() < 6 || seg[0] != 8 || !frame.is_empty() {
                    return None;
                }
                height = be16(seg, 1)?;
                width = be16(seg, 3)?;
                let n = seg[5] as usize;
                if !(n == 1 || n == 3) || seg.len() < 6 + 3 * n || width == 0 || height == 0 {
                    return None;
                }
                for k in 0..n {
                    let c = &seg[6 + 3 * k..9 + 3 * k];
                    frame.push((c[0], c[1] >> 4, c[1] & 15, c[2]));
                }
            }
            // Any other frame type (extended, progressive, lossless, arithmetic).
            0xC1..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => return None,
            0xCC => return None,
            0xC4 => {
                let mut at = 0;
                while at < seg.len() {
                    let class_id = seg[at];
                    let counts: [u8; 16] = seg.get(at + 1..at + 17)?.try_into().ok()?;
                    let n: usize = counts.iter().map(|&c| c as usize).sum();
                    let values = seg.get(at + 17..at + 17 + n)?;
                    let (class, id) = (class_id >> 4, class_id & 15);
                    if class > 1 || id > 1 || n > 256 {
                        return None;
                    }
                    dht[(class * 2 + id) as usize] = Some(derive_table(&counts, values)?);
                    at += 17 + n;
                }
            }
            0xDB => {
                let mut at = 0;
                while at < seg.len() {
                    let (pq, tq) = (seg[at] >> 4, (seg[at] & 15) as usize);
                    if tq > 3 || pq > 1 {
                        return None;
                    }
                    let size = if pq == 0 { 64 } else { 128 };
                    let q = seg.get(at + 1..at + 1 + size)?;
                    for k in 0..64 {
                        let v = if pq == 0 { q[k] as u16 } else { u16::from_be_bytes([q[2 * k], q[2 * k + 1]]) };
                        dqt[tq][ZIGZAG_TO_NATURAL[k] as usize] = v;
                    }
                    dqt_seen[tq] = true;
                    at += 1 + size;
                }
            }
            // A restart interval other than 0.
            0xDD if be16(seg, 0)? != 0 => return None,
            0xDA => scan = Some((seg, segment.end())),
            _ => {}
        }
    }
    let (seg, sos) = scan?;

    // The scan: every component of the frame, in frame order, full spectral range.
    let ns = *seg.first()? as usize;
    if frame.is_empty() || ns != frame.len() || seg.len() < 1 + 2 * ns + 3 {
        return None;
    }
    if seg[1 + 2 * ns..1 + 2 * ns + 3] != [0, 63, 0] {
        return None;
    }
    let mut header = Box::new(ScanHeader {
        tables: [HuffTable::EMPTY; 4],
        mcus_per_row: 0,
        mcu_rows: 0,
        blocks_per_mcu: 0,
        data_bytes: 0,
        block_comp: [0; MAX_MCU_BLOCKS],
        block_dc: [0; MAX_MCU_BLOCKS],
        block_ac: [0; MAX_MCU_BLOCKS],
        block_x: [0; MAX_MCU_BLOCKS],
        block_y: [0; MAX_MCU_BLOCKS],
        comp_h: [1; 3],
        comp_v: [1; 3],
        _pad: [0; 8],
    });
    let mut quant = [[0u16; 64]; 3];
    let (max_h, max_v) = frame.iter().fold((1, 1), |(h, v), c| (h.max(c.1), v.max(c.2)));
    let mut nb = 0usize;
    for (k, &(id, h, v, tq)) in frame.iter().enumerate() {
        let (cs, tables) = (seg[1 + 2 * k], seg[2 + 2 * k]);
        let (td, ta) = ((tables >> 4) as usize, (tables & 15) as usize);
        if cs != id || td > 1 || ta > 1 || tq > 3 || !dqt_seen[tq as usize] || h == 0 || v == 0 || h > 4 || v > 4 {
            return None;
        }
        header.tables[td] = dht[td]?;
        header.tables[2 + ta] = dht[2 + ta]?;
        quant[k] = dqt[tq as usize];
        // One component: not interleaved, an MCU is one block whatever its factors.
        let (h, v) = if frame.len() == 1 { (1, 1) } else { (h, v) };
        header.comp_h[k] = h;
        header.comp_v[k] = v;
        for y in 0..v {
            for x in 0..h {
                if nb == MAX_MCU_BLOCKS {
                    return None;
                }
                header.block_comp[nb] = k as u8;
                header.block_dc[nb] = td as u8;
                header.block_ac[nb] = 2 + ta as u8;
                header.block_x[nb] = x;
                header.block_y[nb] = y;
                nb += 1;
            }
        }
    }
    header.blocks_per_mcu = nb as u32;
    if frame.len() == 1 {
        header.mcus_per_row = width.div_ceil(8) as u32;
        header.mcu_rows = height.div_ceil(8) as u32;
    } else {
        header.mcus_per_row = width.div_ceil(8 * max_h as usize) as u32;
        header.mcu_rows = height.div_ceil(8 * max_v as usize) as u32;
    }

    // The data up to the next marker (stuffed 0xFF 00 -> 0xFF); it must be EOI.
    let src = bytes.get(sos..)?;
    let mut n = 0usize;
    let mut at = 0usize;
    loop {
        let rest = &src[at..];
        let run = rest.iter().position(|&b| b == 0xFF)?;
        data.get_mut(n..n + run)?.copy_from_slice(&rest[..run]);
        n += run;
        at += run;
        match src.get(at + 1)? {
            0x00 => {
                *data.get_mut(n)? = 0xFF;
                n += 1;
                at += 2;
            }
            0xFF => at += 1, // fill byte before a marker
            0xD9 => break,
            _ => return None, // a restart marker, a second scan, anything else
        }
    }
    data.get_mut(n..n + SCAN_PADDING)?.fill(0xFF);
    header.data_bytes = u32::try_from(n).ok()?;
    Some(PreparedScan { header, quant, written: n + SCAN_PADDING })
}

// ------------------------------------------------------ the decoder (kernel's specification)

/// Where a decoder stands between two codewords: bit position, block of the MCU, and the
/// next coefficient (0: the DC comes next). Equal states decode identically from there on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeState {
    pub pos: u64,
    pub block: u32,
    pub k: u32,
}

/// The 32 bits from bit `pos` on, most significant first (past the data: ones).
fn peek32(data: &[u8], pos: u64) -> u32 {
    let byte = (pos / 8) as usize;
    let mut w = 0u64;
    for i in 0..5 {
        w = w << 8 | u64::from(*data.get(byte + i).unwrap_or(&0xFF));
    }
    ((w << (pos % 8)) >> 8) as u32
}

/// The signed value of `s` extra bits `r` (the JPEG's EXTEND).
fn extend(r: u32, s: u32) -> i32 {
    if s == 0 {
        0
    } else if r < 1 << (s - 1) {
        r as i32 - (1 << s) + 1
    } else {
        r as i32
    }
}

/// Decodes one code at the top of `bits`: (length, symbol), None when no code matches.
fn decode_symbol(t: &HuffTable, bits: u32) -> Option<(u32, u32)> {
    let e = t.lookup[(bits >> (32 - LOOKAHEAD_BITS)) as usize];
    if e != 0 {
        return Some((u32::from(e >> 8), u32::from(e & 0xFF)));
    }
    let mut len = LOOKAHEAD_BITS + 1;
    loop {
        let code = (bits >> (32 - len)) as i32;
        if code <= t.maxcode[len as usize] {
            let idx = code + t.valoffset[len as usize];
            return (0..256).contains(&idx).then(|| (len, u32::from(t.values[idx as usize])));
        }
        len += 1;
        if len > 16 {
            return None;
        }
    }
}

/// One codeword: the DC difference or one AC value (with the zeros before it).
enum Unit {
    Dc(i32),
    Ac { k: u32, value: i32 },
    /// End of block, or a run of zeros.
    Skip,
    /// No code matches: corrupt data, or a chunk decoding from a wrong guess (which then
    /// goes on a bit later, to fall into step with the codewords again).
    Invalid,
}

/// Decodes the codeword at `s` (and its extra bits) and advances the state past it. A run
/// past the block's end puts the value at the last position and ends the block, as libjpeg.
fn step(h: &ScanHeader, data: &[u8], s: &mut DecodeState) -> Unit {
    let bits = peek32(data, s.pos);
    let b = s.block as usize;
    if s.k == 0 {
        let Some((len, size)) = decode_symbol(&h.tables[h.block_dc[b] as usize], bits).filter(|&(_, size)| size <= 15) else {
            s.pos += 1;
            return Unit::Invalid;
        };
        let extra = if size == 0 { 0 } else { (bits << len) >> (32 - size) };
        s.pos += u64::from(len + size);
        s.k = 1;
        return Unit::Dc(extend(extra, size));
    }
    let Some((len, rs)) = decode_symbol(&h.tables[h.block_ac[b] as usize], bits) else {
        s.pos += 1;
        s.k = 0;
        return Unit::Invalid;
    };
    let (run, size) = (rs >> 4, rs & 15);
    let unit = if size != 0 {
        let k = (s.k + run).min(63);
        let extra = (bits << len) >> (32 - size);
        s.pos += u64::from(len + size);
        s.k = s.k + run + 1;
        Unit::Ac { k, value: extend(extra, size) }
    } else {
        s.pos += u64::from(len);
        s.k = if run == 15 { s.k + 16 } else { 64 };
        Unit::Skip
    };
    if s.k >= 64 {
        s.k = 0;
        s.block = (s.block + 1) % h.blocks_per_mcu;
    }
    unit
}

/// What decoding one chunk found.
struct ChunkEnd {
    /// The state at the first codeword boundary at or past the chunk's end.
    state: DecodeState,
    /// Blocks begun (DC codes decoded).
    begun: u64,
    /// Codes that matched nothing (zero on the true path of an intact file).
    invalid: u64,
}

/// Decodes from `s` until the first codeword boundary at or past bit `end`, calling `emit`
/// for every unit with the index (counting from 0) of the block it belongs to among those
/// begun here (-1: the block the start state is inside).
fn run_chunk(h: &ScanHeader, data: &[u8], mut s: DecodeState, end: u64, mut emit: impl FnMut(i64, &Unit)) -> ChunkEnd {
    let (mut begun, mut invalid) = (0u64, 0u64);
    let limit = u64::from(h.data_bytes) * 8;
    while s.pos < end {
        let dc = s.k == 0;
        let unit = step(h, data, &mut s);
        match unit {
            Unit::Invalid => {
                // The ones that pad the last byte after the last block end the data.
                if dc && s.block == 0 && limit - (s.pos - 1) < 8 {
                    s.pos = limit;
                } else {
                    invalid += 1;
                }
            }
            Unit::Dc(_) => begun += 1,
            _ => {}
        }
        emit(begun as i64 - 1, &unit);
    }
    ChunkEnd { state: s, begun, invalid }
}

/// Why a parallel decode failed.
#[derive(Debug, PartialEq, Eq)]
pub enum ScanError {
    /// A code no table has, a run past a block's end, or the data ended early.
    Corrupt,
    /// The scan holds a different number of blocks than the frame.
    BlockCount { decoded: u64, expected: u64 },
}

/// Bits a chunk decoder decodes before its chunk from a guessed state, to fall into step
/// with the codewords by the time its chunk begins (measured on photos at quality 90: 4:4:4
/// takes under 500 bits, 4:2:0 up to about 3,500).
pub const SYNC_LEAD_BITS: u64 = 4096;

/// Decodes the scan prepared in `data` in chunks of `chunk_bits` (the GPU kernel's
/// algorithm, chunk by chunk) into `dst` as [`crate::read_coefficients`] lays out the blocks
/// `layout` names: each component's window of blocks, natural order, DC values. Returns the
/// rounds the chunks took to agree (1: every guess was right).
pub fn decode_parallel(h: &ScanHeader, data: &[u8], layout: &CoefLayout, chunk_bits: u64, dst: &mut [i16]) -> Result<usize, ScanError> {
    let bits = u64::from(h.data_bytes) * 8;
    let chunk = chunk_bits.max(32);
    let threads = bits.div_ceil(chunk).max(1) as usize;
    let chunk_end = |t: usize| ((t as u64 + 1) * chunk).min(bits);
    // Round 0: every chunk from a guess (block 0, a DC next) made SYNC_LEAD_BITS before it.
    let mut entry: Vec<DecodeState> = (0..threads)
        .map(|t| {
            let start = t as u64 * chunk;
            let guess = DecodeState { pos: start.saturating_sub(SYNC_LEAD_BITS), block: 0, k: 0 };
            if t == 0 { guess } else { run_chunk(h, data, guess, start, |_, _| {}).state }
        })
        .collect();
    let mut exit = Vec::with_capacity(threads);
    let mut begun = Vec::with_capacity(threads);
    for (t, &e) in entry.iter().enumerate() {
        let end = run_chunk(h, data, e, chunk_end(t), |_, _| {});
        exit.push(end.state);
        begun.push(end.begun);
    }
    // Rounds: each chunk from its predecessor's end, until no end moves (as the kernel:
    // all read the old ends, then all write the new ones).
    let mut rounds = 0;
    loop {
        rounds += 1;
        let before = exit.clone();
        let mut changed = false;
        for t in 1..threads {
            let from = before[t - 1];
            if from == entry[t] {
                continue;
            }
            entry[t] = from;
            let end = run_chunk(h, data, from, chunk_end(t), |_, _| {});
            changed |= end.state != exit[t];
            exit[t] = end.state;
            begun[t] = end.begun;
        }
        if !changed {
            break;
        }
    }
    let decoded: u64 = begun.iter().sum();
    if decoded != h.total_blocks() {
        return Err(ScanError::BlockCount { decoded, expected: h.total_blocks() });
    }
    // Write pass: each chunk knows its first block from the counts before it.
    let total = h.total_blocks() as usize;
    let mut dc_diff = vec![0i32; total];
    dst[..layout.coefficients].fill(0);
    let (mut first, mut invalid) = (0u64, 0u64);
    for t in 0..threads {
        let end = run_chunk(h, data, entry[t], chunk_end(t), |local, unit| {
            let g = (first as i64 + local) as usize;
            match *unit {
                Unit::Dc(d) => dc_diff[g] = d,
                Unit::Ac { k, value } => {
                    if let Some(at) = block_slot(h, layout, g) {
                        dst[at + ZIGZAG_TO_NATURAL[k as usize] as usize] = value as i16;
                    }
                }
                Unit::Skip | Unit::Invalid => {}
            }
        });
        first += begun[t];
        invalid += end.invalid;
    }
    if invalid > 0 {
        return Err(ScanError::Corrupt);
    }
    // DC values: a running sum per component in decode order.
    let mut pred = [0i32; 3];
    for (g, &d) in dc_diff.iter().enumerate() {
        let c = h.block_comp[g % h.blocks_per_mcu as usize] as usize;
        pred[c] += d;
        if let Some(at) = block_slot(h, layout, g) {
            dst[at] = pred[c] as i16;
        }
    }
    Ok(rounds)
}

/// Where block `g` (decode order) lands in the layout's run, if the layout keeps it.
fn block_slot(h: &ScanHeader, layout: &CoefLayout, g: usize) -> Option<usize> {
    let bpm = h.blocks_per_mcu as usize;
    let (m, b) = (g / bpm, g % bpm);
    let (mx, my) = (m % h.mcus_per_row as usize, m / h.mcus_per_row as usize);
    let c = h.block_comp[b] as usize;
    let bx = mx * h.comp_h[c] as usize + h.block_x[b] as usize;
    let by = my * h.comp_v[c] as usize + h.block_y[b] as usize;
    let g = &layout.comp[c];
    (bx >= g.bx0 && bx < g.bx0 + g.bw && by >= g.by0 && by < g.by0 + g.bh).then(|| g.offset + ((by - g.by0) * g.bw + bx - g.bx0) * 64)
}
