//! Inputs made from seeds: a fast random generator and the mutations a
//! hostile or broken client makes (flipped bits, cut and doubled ranges,
//! JSON tokens in odd places, extreme numbers, inputs spliced together).
//! No coverage feedback: stable Rust has no sanitizer coverage, so the
//! seeds are chosen to reach every branch that matters and the mutations
//! to leave them.

/// xorshift64*: fast, and the same sequence for the same seed, so a
/// failure is reproduced with `--seed`.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Pieces worth inserting into JSON and tokens.
const DICTIONARY: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e999",
    "-0",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775808",
    "1.5",
    "\"type\"",
    "\"send_message\"",
    "\"refresh\"",
    "\"ping\"",
    "\"pull_backlog\"",
    "\"content\"",
    "\"kind\"",
    "\"text\"",
    "\"ciphertext\"",
    "\"image\"",
    "\"conversation_id\"",
    "\"client_msg_id\"",
    "\"limit\"",
    "\"since_seq\"",
    "\"seq\"",
    "\"token\"",
    "\"alg\"",
    "\"none\"",
    "\"HS256\"",
    "\"EdDSA\"",
    "\"exp\"",
    "\"sub\"",
    "\"tenant\"",
    ".",
    "=",
    "\u{feff}",
    "\u{10ffff}",
    "\0asm",
    "\r\n",
];

/// One mutation of `input`, in place, kept within `max_len` bytes.
fn mutate_once(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>], max_len: usize) {
    let len = input.len();
    match rng.below(10) {
        0 if len > 0 => {
            let i = rng.below(len);
            input[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            input[i] = rng.next_u64() as u8;
        }
        2 => {
            let i = rng.below(len + 1);
            input.insert(i, rng.next_u64() as u8);
        }
        3 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(16)).min(len);
            input.drain(start..end);
        }
        4 if len > 0 => {
            // Doubles a range: deep nesting, long strings, repeated keys.
            let start = rng.below(len);
            let end = (start + 1 + rng.below(64)).min(len);
            let piece: Vec<u8> = input[start..end].to_vec();
            let times = 1 + rng.below(64);
            for _ in 0..times {
                if input.len() + piece.len() > max_len {
                    break;
                }
                let at = rng.below(input.len() + 1);
                input.splice(at..at, piece.iter().copied());
            }
        }
        5 | 6 => {
            let token = DICTIONARY[rng.below(DICTIONARY.len())].as_bytes();
            let at = rng.below(len + 1);
            input.splice(at..at, token.iter().copied());
        }
        7 if len > 0 => {
            input.truncate(rng.below(len));
        }
        8 if !corpus.is_empty() => {
            // The head of this input with the tail of another.
            let other = &corpus[rng.below(corpus.len())];
            let cut = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            input.truncate(cut);
            input.extend_from_slice(&other[from..]);
        }
        _ => {
            // A run of one byte: long numbers, deep brackets.
            let byte = *b"[{9\"a".get(rng.below(5)).unwrap_or(&b'[');
            let at = rng.below(len + 1);
            let n = 1 + rng.below(512);
            input.splice(at..at, std::iter::repeat_n(byte, n));
        }
    }
    input.truncate(max_len);
}

/// A new input: a seed with one to eight mutations.
pub fn next_input(rng: &mut Rng, corpus: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut input = corpus
        .get(rng.below(corpus.len()))
        .cloned()
        .unwrap_or_default();
    for _ in 0..1 + rng.below(8) {
        mutate_once(rng, &mut input, corpus, max_len);
    }
    input
}
