//! Wire codecs (filled in by the codec work).
