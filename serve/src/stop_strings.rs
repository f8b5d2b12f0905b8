//! Stop strings: generated text is released as it comes, except a tail that
//! could still become a stop string; when one appears, the text before it is
//! the last released and the sequence ends.

/// Watches a sequence's text for its stop strings.
#[derive(Debug, Default)]
pub struct StopStrings {
    stops: Vec<String>,
    /// Text not yet released: it ends with a prefix of some stop string.
    held: String,
}

/// What [`StopStrings::push`] found.
#[derive(Debug, PartialEq, Eq)]
pub struct Released {
    /// Text safe to send.
    pub text: String,
    /// A stop string appeared (the text before it was released, nothing after).
    pub stopped: bool,
}

impl StopStrings {
    /// A watcher for `stops` (empty strings are ignored).
    pub fn new(stops: Vec<String>) -> Self {
        Self { stops: stops.into_iter().filter(|s| !s.is_empty()).collect(), held: String::new() }
    }

    /// Takes the next piece of text.
    pub fn push(&mut self, piece: &str) -> Released {
        if self.stops.is_empty() {
            return Released { text: piece.to_owned(), stopped: false };
        }
        self.held.push_str(piece);
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            let text = self.held[..at].to_owned();
            self.held.clear();
            return Released { text, stopped: true };
        }
        let keep = self.partial_tail();
        let cut = self.held.len() - keep;
        let text = self.held[..cut].to_owned();
        self.held.drain(..cut);
        Released { text, stopped: false }
    }

    /// The text still held, released when the sequence ends for another reason.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Bytes at the end of the held text that begin some stop string (the
    /// longest such tail, on a character boundary).
    fn partial_tail(&self) -> usize {
        let held = self.held.as_str();
        let mut best = 0;
        for stop in &self.stops {
            let longest = stop.len().saturating_sub(1).min(held.len());
            for n in (best + 1..=longest).rev() {
                let start = held.len() - n;
                if held.is_char_boundary(start) && stop.starts_with(&held[start..]) {
                    best = n;
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut s = StopStrings::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let r = s.push(p);
            out.push_str(&r.text);
            if r.stopped {
                return (out, true);
            }
        }
        out.push_str(&s.finish());
        (out, false)
    }

    #[test]
    fn a_stop_split_over_pieces_is_found_and_cut() {
        assert_eq!(run(&["\n\nUser:"], &["Hello", " there\n", "\nUs", "er: more"]), ("Hello there".into(), true));
        assert_eq!(run(&["END"], &["abcE", "N", "D!"]), ("abc".into(), true));
    }

    #[test]
    fn text_that_only_looked_like_a_stop_is_released() {
        let mut s = StopStrings::new(vec!["END".into()]);
        assert_eq!(s.push("abE"), Released { text: "ab".into(), stopped: false });
        assert_eq!(s.push("x"), Released { text: "Ex".into(), stopped: false });
        assert_eq!(run(&["END"], &["EN"]), ("EN".into(), false));
    }

    #[test]
    fn the_earliest_of_several_stops_wins_and_multibyte_text_is_kept_whole() {
        assert_eq!(run(&["b", "a"], &["xxab"]), ("xx".into(), true));
        assert_eq!(run(&["é!"], &["café", " ok"]), ("café ok".into(), false));
        assert_eq!(run(&["é!"], &["café", "!"]), ("caf".into(), true));
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), false));
    }
}
