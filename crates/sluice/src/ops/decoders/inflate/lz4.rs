//! The LZ4 block format (raw blocks, no frame header: what `lz4.block.compress(data,
//! store_size=False)` writes and nvCOMP's batched LZ4 reads), decoded on the host.
//!
//! A block is a run of sequences. Each starts with a token byte: its high nibble is the
//! literal count, its low nibble the match length minus 4; a nibble of 15 goes on in extension
//! bytes, each added, until one below 255. The literals follow, then (except in the last
//! sequence, which holds only literals and ends the block) a 2-byte little-endian offset back
//! into the output, never 0, and the match: `length` bytes copied one at a time from `offset`
//! bytes back, so an offset below the length repeats the last `offset` bytes.
//!
//! The decoder reads as the reference decoder (`LZ4_decompress_safe`) does: the block ends
//! where its input ends after a sequence's literals (the spec's end-of-block rules, five
//! trailing literals and no match in the last 12 bytes, are not required), and anything else
//! is a [`Fault`] at a byte of the block. It never reads or writes out of bounds. It goes on
//! counting when the output does not hold the data, so the caller can say how large it is
//! (DALI's `check_output_size` message). `inflate.cu` decodes the same way, with the same
//! faults (checked by the host-run twin tests in gpu.rs).

use std::fmt;

/// Why a block cannot be decoded. The codes are the kernel's (`INFLATE_FAULT_*` in
/// inflate.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum FaultKind {
    /// The input ends after a match, where another sequence should begin.
    NoToken = 1,
    /// The input ends inside a literal length's extension bytes.
    LiteralLength = 2,
    /// The literals run past the end of the input.
    Literals = 3,
    /// The input ends inside a match offset.
    Offset = 4,
    /// A match offset of 0.
    ZeroOffset = 5,
    /// A match offset larger than the output decoded so far.
    Distance = 6,
    /// The input ends inside a match length's extension bytes.
    MatchLength = 7,
}

impl FaultKind {
    pub(crate) const ALL: [FaultKind; 7] =
        [FaultKind::NoToken, FaultKind::LiteralLength, FaultKind::Literals, FaultKind::Offset, FaultKind::ZeroOffset, FaultKind::Distance, FaultKind::MatchLength];

    /// The kind with the kernel's code `code` (0, no fault, is none).
    pub(crate) fn from_code(code: u64) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| *k as u64 == code)
    }
}

/// A block that cannot be decoded: what went wrong, at which byte of the block, the value
/// involved (a literal count or an offset) and how many bytes were decoded before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fault {
    pub kind: FaultKind,
    pub at: u64,
    pub value: u64,
    pub decoded: u64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Fault { at, value, decoded, .. } = *self;
        match self.kind {
            FaultKind::NoToken => write!(f, "the block ends at byte {at} after a match; its last sequence must hold only literals"),
            FaultKind::LiteralLength => write!(f, "the literal count's extension from byte {at} runs past the end of the block"),
            FaultKind::Literals => write!(f, "{value} literals at byte {at} run past the end of the block"),
            FaultKind::Offset => write!(f, "the match offset at byte {at} is cut off by the end of the block"),
            FaultKind::ZeroOffset => write!(f, "match offset 0 at byte {at}"),
            FaultKind::Distance => {
                write!(f, "match offset {value} at byte {at} reaches before the start of the output ({decoded} bytes decoded so far)")
            }
            FaultKind::MatchLength => write!(f, "the match length's extension from byte {at} runs past the end of the block"),
        }
    }
}

/// Decodes the LZ4 block `src` into `dst`; returns the size of the decoded data, which is
/// larger than `dst` when `dst` cannot hold it (then `dst` holds its beginning). Bytes of
/// `dst` past the decoded data are left as they were.
pub(crate) fn decode(src: &[u8], dst: &mut [u8]) -> Result<u64, Fault> {
    let n = src.len();
    let cap = dst.len() as u64;
    // `ip` indexes `src` (always <= n); `op` counts the output, which may pass `cap`.
    let (mut ip, mut op) = (0usize, 0u64);
    let fault = |kind, at: usize, value: u64, decoded: u64| Fault { kind, at: at as u64, value, decoded };
    loop {
        if ip == n {
            return Err(fault(FaultKind::NoToken, ip, 0, op));
        }
        let token = src[ip];
        ip += 1;
        let start = ip;
        let lit = extended(src, &mut ip, (token >> 4) as u64).ok_or_else(|| fault(FaultKind::LiteralLength, start, 0, op))?;
        if lit > (n - ip) as u64 {
            return Err(fault(FaultKind::Literals, ip, lit, op));
        }
        let lit_len = lit as usize;
        if op < cap {
            let k = lit.min(cap - op) as usize;
            dst[op as usize..op as usize + k].copy_from_slice(&src[ip..ip + k]);
        }
        ip += lit_len;
        op += lit;
        if ip == n {
            return Ok(op);
        }
        if n - ip < 2 {
            return Err(fault(FaultKind::Offset, ip, 0, op));
        }
        let offset = u16::from_le_bytes([src[ip], src[ip + 1]]) as u64;
        if offset == 0 {
            return Err(fault(FaultKind::ZeroOffset, ip, 0, op));
        }
        if offset > op {
            return Err(fault(FaultKind::Distance, ip, offset, op));
        }
        ip += 2;
        let start = ip;
        let len = extended(src, &mut ip, (token & 15) as u64).ok_or_else(|| fault(FaultKind::MatchLength, start, 0, op))? + 4;
        if op < cap {
            copy_match(dst, op as usize, offset as usize, (op + len).min(cap) as usize);
        }
        op += len;
    }
}

/// A token nibble `nibble` with its extension bytes (read from `src` at `ip` when the nibble
/// is 15); `None` when the input ends before the last one.
#[inline(always)]
fn extended(src: &[u8], ip: &mut usize, nibble: u64) -> Option<u64> {
    let mut v = nibble;
    if nibble == 15 {
        loop {
            let b = *src.get(*ip)?;
            *ip += 1;
            v += b as u64;
            if b != 255 {
                break;
            }
        }
    }
    Some(v)
}

/// Writes `dst[start..end]` as the match `offset` bytes back (`offset <= start`). The
/// output from `start - offset` on repeats with period `offset`, so the bytes already in
/// place, a whole number of periods, are copied forward as one piece, twice as long each
/// time: every copy is between disjoint ranges.
#[inline(always)]
fn copy_match(dst: &mut [u8], start: usize, offset: usize, end: usize) {
    let from = start - offset;
    let mut at = start;
    while at < end {
        let k = (at - from).min(end - at);
        dst.copy_within(from..from + k, at);
        at += k;
    }
}

#[cfg(test)]
pub(crate) mod encode {
    //! Test-only LZ4 block writers: a greedy compressor (hash of 4 bytes, the spec's end rules:
    //! the last 5 bytes are literals, no match starts in the last 12) and a writer of chosen
    //! sequences, for the overlaps and corner cases a compressor would not pick.

    /// Appends one sequence: `literals`, then the match `(offset, length)` if any.
    pub(crate) fn sequence(out: &mut Vec<u8>, literals: &[u8], m: Option<(u16, usize)>) {
        let lit = literals.len();
        let ml = m.map_or(0, |(_, len)| {
            assert!(len >= 4, "a match is at least 4 bytes");
            len - 4
        });
        out.push(((lit.min(15) as u8) << 4) | if m.is_some() { ml.min(15) as u8 } else { 0 });
        extension(out, lit);
        out.extend_from_slice(literals);
        if let Some((offset, _)) = m {
            out.extend_from_slice(&offset.to_le_bytes());
            extension(out, ml);
        }
    }

    fn extension(out: &mut Vec<u8>, v: usize) {
        if v >= 15 {
            let mut rest = v - 15;
            while rest >= 255 {
                out.push(255);
                rest -= 255;
            }
            out.push(rest as u8);
        }
    }

    /// `data` as one LZ4 block, matches found greedily.
    pub(crate) fn compress(data: &[u8]) -> Vec<u8> {
        const MIN_MATCH: usize = 4;
        let n = data.len();
        let mut out = Vec::new();
        let mut table = vec![usize::MAX; 1 << 12];
        let hash = |p: usize| (u32::from_le_bytes(data[p..p + 4].try_into().unwrap()).wrapping_mul(2654435761) >> 20) as usize;
        let (mut anchor, mut p) = (0, 0);
        // A match may start up to 12 bytes before the end and must end 5 bytes before it.
        let match_limit = n.saturating_sub(12);
        while p < match_limit {
            let h = hash(p);
            let cand = table[h];
            table[h] = p;
            if cand != usize::MAX && p - cand <= 65535 && data[cand..cand + MIN_MATCH] == data[p..p + MIN_MATCH] {
                let mut len = MIN_MATCH;
                while p + len < n - 5 && data[cand + len] == data[p + len] {
                    len += 1;
                }
                sequence(&mut out, &data[anchor..p], Some(((p - cand) as u16, len)));
                p += len;
                anchor = p;
            } else {
                p += 1;
            }
        }
        sequence(&mut out, &data[anchor..], None);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::encode::{compress, sequence};
    use super::*;

    /// Deterministic bytes (an LCG): incompressible for the greedy compressor.
    pub(crate) fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect()
    }

    fn decoded(block: &[u8], cap: usize) -> (Result<u64, Fault>, Vec<u8>) {
        let mut out = vec![0xee; cap];
        let r = decode(block, &mut out);
        (r, out)
    }

    #[test]
    fn blocks_written_by_the_lz4_library_decode() {
        // lz4.block.compress(x, store_size=False) with python-lz4 4.x (liblz4 1.9.4).
        let cases: [(&[u8], Vec<u8>); 4] = [
            (&[0x00], vec![]),
            (&[0x10, 0x61], b"a".to_vec()),
            (&[0x3f, 0x61, 0x62, 0x63, 0x03, 0x00, 0x03, 0x50, 0x62, 0x63, 0x61, 0x62, 0x63], b"abc".repeat(10)),
            (&[0x1f, 0x78, 0x01, 0x00, 0xff, 0x14, 0x50, 0x78, 0x78, 0x78, 0x78, 0x78], vec![b'x'; 300]),
        ];
        for (block, want) in cases {
            let (r, out) = decoded(block, want.len());
            assert_eq!(r, Ok(want.len() as u64));
            assert_eq!(out, want);
        }
        let mut block = vec![0xff, 0x05];
        block.extend(0u8..20);
        block.extend([0x14, 0x00, 0x10, 0x50, 0x0f, 0x10, 0x11, 0x12, 0x13]);
        let want: Vec<u8> = (0u8..20).cycle().take(60).collect();
        assert_eq!(decoded(&block, 60), (Ok(60), want));
    }

    #[test]
    fn round_trips_through_the_test_compressor() {
        let mut cases: Vec<Vec<u8>> = vec![vec![], vec![7], noise(1, 1), noise(100, 2), noise(70000, 3), vec![0; 100_000], b"abcd".repeat(5000)];
        // Text-like data: words from a small alphabet.
        let words = noise(4000, 4).iter().map(|b| b"the quick brown fox jumps over lazy dogs "[(*b % 41) as usize]).collect::<Vec<u8>>();
        cases.push(words);
        // Noise with repeats far apart (offsets up to 65535).
        let mut far = noise(66000, 5);
        far.extend_from_within(100..5100);
        cases.push(far);
        for data in cases {
            let block = compress(&data);
            let (r, out) = decoded(&block, data.len());
            assert_eq!(r, Ok(data.len() as u64), "{} bytes", data.len());
            assert!(out == data, "{} bytes", data.len());
        }
    }

    #[test]
    fn overlapping_matches_repeat_the_last_offset_bytes() {
        for offset in 1..=40usize {
            for len in [4, 5, 15, 16, 18, 19, 31, 32, 33, 64, 100, 270, 300] {
                let lits = noise(offset, offset as u64);
                let mut block = Vec::new();
                sequence(&mut block, &lits, Some((offset as u16, len)));
                sequence(&mut block, b"tail!", None);
                let want: Vec<u8> = lits.iter().copied().cycle().take(offset + len).chain(*b"tail!").collect();
                let (r, out) = decoded(&block, want.len());
                assert_eq!((r, &out), (Ok(want.len() as u64), &want), "offset {offset}, length {len}");
            }
        }
    }

    #[test]
    fn a_small_output_holds_the_beginning_and_the_full_size_is_counted() {
        let data = b"abcdefgh".repeat(40);
        let block = compress(&data);
        for cap in [0, 1, 7, 8, 9, 100, 319] {
            let (r, out) = decoded(&block, cap);
            assert_eq!(r, Ok(320));
            assert_eq!(out, &data[..cap], "capacity {cap}");
        }
        // A larger output is left as it was past the data.
        let (r, out) = decoded(&block, 330);
        assert_eq!(r, Ok(320));
        assert_eq!((&out[..320], &out[320..]), (&data[..], &[0xee; 10][..]));
    }

    #[test]
    fn literal_and_match_lengths_extend_over_many_bytes() {
        for lit in [14, 15, 16, 269, 270, 271, 524, 525, 1000] {
            for len in [18, 19, 20, 273, 274, 275, 1000] {
                let lits = noise(lit, lit as u64);
                let mut block = Vec::new();
                sequence(&mut block, &lits, Some((3, len)));
                sequence(&mut block, &[], None);
                let (r, out) = decoded(&block, lit + len);
                assert_eq!(r, Ok((lit + len) as u64));
                let start = lit - 3;
                let want: Vec<u8> = lits.iter().copied().chain(lits[start..].iter().copied().cycle().take(len)).collect();
                assert!(out == want, "{lit} literals, match of {len}");
            }
        }
    }

    fn fault(block: &[u8]) -> Fault {
        decode(block, &mut [0u8; 64]).expect_err("a corrupt block")
    }

    #[test]
    fn every_corruption_is_a_fault_at_its_byte() {
        let f = |kind, at, value, decoded| Fault { kind, at, value, decoded };
        assert_eq!(fault(&[]), f(FaultKind::NoToken, 0, 0, 0));
        // Four literals announced, three there.
        assert_eq!(fault(&[0x40, 1, 2, 3]), f(FaultKind::Literals, 1, 4, 0));
        // 15 + 255 + ... literal count cut off.
        assert_eq!(fault(&[0xf0, 255]), f(FaultKind::LiteralLength, 1, 0, 0));
        assert_eq!(fault(&[0xf0]), f(FaultKind::LiteralLength, 1, 0, 0));
        // One byte of offset.
        assert_eq!(fault(&[0x20, 1, 2, 1]), f(FaultKind::Offset, 3, 0, 2));
        assert_eq!(fault(&[0x20, 1, 2, 0, 0, 0x00]), f(FaultKind::ZeroOffset, 3, 0, 2));
        assert_eq!(fault(&[0x20, 1, 2, 3, 0, 0x00]), f(FaultKind::Distance, 3, 3, 2));
        assert_eq!(fault(&[0x20, 1, 2, 0, 1, 0x00]), f(FaultKind::Distance, 3, 256, 2));
        // Match length 15 + extension cut off.
        assert_eq!(fault(&[0x2f, 1, 2, 2, 0, 255]), f(FaultKind::MatchLength, 5, 0, 2));
        // Ends after a match.
        assert_eq!(fault(&[0x20, 1, 2, 2, 0]), f(FaultKind::NoToken, 5, 0, 6));
    }

    #[test]
    fn truncated_and_corrupted_blocks_never_panic() {
        let data: Vec<u8> = (0..3000).map(|i| if i % 97 < 40 { (i % 7) as u8 } else { noise(1, i)[0] }).collect();
        let block = compress(&data);
        let mut out = vec![0u8; data.len()];
        for cut in 0..block.len() {
            let _ = decode(&block[..cut], &mut out);
        }
        let mut bad = block.clone();
        for (k, b) in noise(block.len() * 3, 9).iter().enumerate() {
            bad[(k * 7919) % block.len()] = *b;
            for cap in [0, 100, data.len()] {
                let _ = decode(&bad, &mut out[..cap]);
            }
        }
        // Cutting inside the literals of the last sequence is always a fault.
        assert_eq!(decode(&block[..block.len() - 1], &mut out).unwrap_err().kind, FaultKind::Literals);
    }

    #[test]
    fn fault_codes_round_trip() {
        for k in FaultKind::ALL {
            assert_eq!(FaultKind::from_code(k as u64), Some(k));
        }
        assert_eq!(FaultKind::from_code(0), None);
        assert_eq!(FaultKind::from_code(8), None);
    }
}
