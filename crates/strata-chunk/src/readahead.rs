//! Readahead for one reader (one open file): sequential reads grow a prefetch window, up
//! to `--max-readahead`; a read that jumps elsewhere resets it, so random readers get none.
//! A first read at offset 0 counts as the start of a sequential scan.

/// The readahead state of one reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Where the next read is expected if the reader is sequential.
    next: u64,
    /// Bytes to prefetch beyond a sequential read (0 = no readahead).
    size: u64,
    /// Smallest window once a reader turns sequential (one block).
    min: u64,
    max: u64,
    /// Up to where prefetches were already requested.
    requested: u64,
}

impl Window {
    /// A window that starts at one block and grows up to `max`.
    pub fn new(block_size: u64, max: u64) -> Window {
        Window {
            next: 0,
            size: 0,
            min: block_size.min(max),
            max,
            requested: 0,
        }
    }

    /// Record a read of `[off, off+len)` and return the range to prefetch now, if any.
    pub fn on_read(&mut self, off: u64, len: u64) -> Option<(u64, u64)> {
        let end = off.saturating_add(len);
        // The kernel sends readahead requests concurrently (up to its own readahead, 8 MiB
        // on a mount, ahead), so a sequential reader's reads arrive out of order: once
        // sequential, a read up to a block past the expected offset counts, and so does a
        // late one anywhere in the window already passed.
        let sequential = self.max > 0
            && if self.size > 0 {
                off <= self.next.saturating_add(self.min)
                    && off.saturating_add(self.size.max(self.min)) >= self.next
            } else {
                off == self.next
            };
        if sequential {
            self.size = if self.size == 0 {
                self.min
            } else {
                (self.size * 2).min(self.max)
            };
            self.next = self.next.max(end);
        } else {
            self.size = 0;
            self.requested = end;
            self.next = end;
        }
        if self.size == 0 {
            return None;
        }
        let start = self.requested.max(end);
        let stop = end.saturating_add(self.size);
        if start >= stop {
            return None;
        }
        self.requested = stop;
        Some((start, stop - start))
    }

    /// Prefetches from `at` on were not started (no free slot): request them again with
    /// the next read.
    pub fn rewind(&mut self, at: u64) {
        self.requested = self.requested.min(at);
    }

    /// Current window size (0 = not sequential).
    pub fn size(&self) -> u64 {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_readers_grow_random_readers_get_nothing() {
        let mut w = Window::new(4, 32);
        assert_eq!(
            w.on_read(100, 4),
            None,
            "first read elsewhere: no readahead"
        );
        assert_eq!(w.on_read(104, 4), Some((108, 4)));
        assert_eq!(w.on_read(108, 4), Some((112, 8)), "window doubles");
        assert_eq!(
            w.on_read(112, 4),
            Some((120, 12)),
            "only what was not requested yet"
        );
        assert_eq!(w.on_read(116, 4), Some((132, 20)));
        assert_eq!(
            w.on_read(120, 4),
            Some((152, 4)),
            "window stays at the maximum"
        );
        assert_eq!(w.size(), 32, "capped at the maximum");
        let mut r = Window::new(4, 32);
        for off in [500u64, 1000, 52, 7000, 3] {
            assert_eq!(r.on_read(off, 4), None, "random reads never prefetch");
        }
        let mut jittery = Window::new(8, 64);
        assert_eq!(jittery.on_read(0, 4), Some((4, 8)));
        assert_eq!(
            jittery.on_read(8, 4),
            Some((12, 16)),
            "a bit ahead: sequential"
        );
        assert_eq!(jittery.on_read(4, 4), Some((28, 12)), "the late one too");
        jittery.rewind(30);
        assert_eq!(
            jittery.on_read(12, 4),
            Some((30, 50)),
            "dropped ones asked again"
        );
        // A late read from well behind (the kernel's readahead runs up to 8 MiB ahead)
        // keeps the reader sequential; a jump back beyond the window does not.
        let mut late = Window::new(4, 64);
        late.on_read(1000, 4);
        for off in (1000..1040).step_by(4) {
            late.on_read(off, 4);
        }
        assert!(late.size() > 0);
        late.on_read(1024, 4);
        assert!(late.size() > 0, "late by 16 bytes, inside the window");
        late.on_read(1040, 4);
        assert_eq!(late.size(), 64, "still growing");
        late.on_read(1044 - 64 - 1, 4);
        assert_eq!(late.size(), 0, "behind the whole window: a jump");
        let mut off_switch = Window::new(4, 0);
        off_switch.on_read(0, 4);
        assert_eq!(off_switch.on_read(4, 4), None, "max 0 disables readahead");
    }
}
