//! The order DALI's list readers (file, coco, sequence, numpy) put their whole list in
//! before sharding when `random_shuffle` is on: C++'s `std::shuffle` as GNU libstdc++
//! implements it, driven by `std::mt19937` seeded with DALI's fixed 524287, the same on every
//! shard and every run. The shuffle buffer (`initial_fill`) then mixes within the shard.
//!
//! This matters beyond matching DALI sample for sample: a list sorted by class (a folder per
//! class) would otherwise give each shard a run of whole classes, and a buffer of 1,024 mixes
//! less than one ImageNet class, so batches would hold one or two classes each.
//!
//! Both pieces are reproduced exactly (checked against DALI 2.4's readers): the 32-bit
//! Mersenne Twister (fully specified by the C++ standard) and libstdc++'s `std::shuffle`,
//! which draws two swap positions from one number while `n * n` fits the generator's range
//! and bounds its draws with Lemire's multiply-and-reject.

/// `std::mt19937`.
struct Mt19937 {
    state: [u32; 624],
    next: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, next: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.next >= 624 {
            for k in 0..624 {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.state[k] = self.state[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.next = 0;
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// libstdc++'s `uniform_int_distribution<size_t>{0, hi}` over a 32-bit generator.
    fn uniform(&mut self, hi: u64) -> u64 {
        const RANGE: u64 = u32::MAX as u64;
        if hi == RANGE {
            return self.next_u32() as u64;
        }
        assert!(
            hi < RANGE,
            "lists of more than 2^32 entries are not shuffled this way"
        );
        let range = hi + 1;
        let mut product = self.next_u32() as u64 * range;
        let mut low = product as u32 as u64;
        if low < range {
            let threshold = (1u64 << 32).wrapping_sub(range) % range;
            while low < threshold {
                product = self.next_u32() as u64 * range;
                low = product as u32 as u64;
            }
        }
        product >> 32
    }
}

/// The indices `0..n` in the order DALI's list readers read them with `random_shuffle`.
pub fn dali_list_order(n: usize) -> Vec<usize> {
    const DALI_DATALOADER_SEED: u32 = 524_287;
    let mut v: Vec<usize> = (0..n).collect();
    if n == 0 {
        return v;
    }
    let mut g = Mt19937::new(DALI_DATALOADER_SEED);
    let n64 = n as u64;
    if u32::MAX as u64 / n64 >= n64 {
        // Two positions from one draw: an odd number of elements is left to swap after a
        // first single swap when n is even.
        let mut i = 1;
        if n % 2 == 0 {
            let j = g.uniform(1) as usize;
            v.swap(i, j);
            i += 1;
        }
        while i != n {
            let span = i as u64 + 1;
            let x = g.uniform(span * (span + 1) - 1);
            v.swap(i, (x / (span + 1)) as usize);
            v.swap(i + 1, (x % (span + 1)) as usize);
            i += 2;
        }
    } else {
        for i in 1..n {
            let j = g.uniform(i as u64) as usize;
            v.swap(i, j);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mersenne_twister_matches_the_standard() {
        // The C++ standard's check: the 10000th output of a default-seeded (5489) mt19937.
        let mut g = Mt19937::new(5489);
        let last = (0..10_000).map(|_| g.next_u32()).last().unwrap();
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn orders_match_dali() {
        // Read off DALI 2.4's file reader (random_shuffle, initial_fill=1, one shard).
        assert_eq!(dali_list_order(10), [5, 9, 1, 6, 7, 2, 0, 4, 8, 3]);
        assert_eq!(
            &dali_list_order(37)[..12],
            [31, 0, 14, 16, 17, 18, 30, 5, 3, 9, 13, 34]
        );
        assert_eq!(
            &dali_list_order(1000)[..12],
            [30, 812, 788, 887, 165, 659, 376, 711, 318, 513, 613, 324]
        );
        assert_eq!(dali_list_order(1), [0]);
        assert!(dali_list_order(0).is_empty());
    }

    #[test]
    fn large_lists_are_permutations() {
        // Past 65,535 entries libstdc++ draws one position at a time (the other branch).
        let v = dali_list_order(70_001);
        let mut seen = vec![false; v.len()];
        for &x in &v {
            assert!(!seen[x]);
            seen[x] = true;
        }
        assert_ne!(v[..10], (0..10).collect::<Vec<_>>()[..]);
    }
}
