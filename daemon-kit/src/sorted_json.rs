//! Compact JSON with every object's keys sorted, written straight from a `Serialize` value.
//!
//! # Why
//! A trace line is a record with its keys sorted ([`crate::trace_record`]): the lines are byte
//! for byte what the writers produced when they went through a `serde_json::Value`, whose
//! objects are `BTreeMap`s. Building that tree for every line (a `String` per key, a node per
//! value, a map per object) and printing it costs more than the record's own work on a busy
//! simulated switch. This serializer writes the same bytes without the tree, and without
//! allocating but for the line's own `String`.
//!
//! # How
//! An object's values are written one after another as they come, each remembered with its
//! key and where its text lies. A key is remembered as its first eight octets read as one
//! big-endian number (its prefix, which orders two keys whenever the two differ) and its
//! length; a longer key's text is kept aside. When the object closes it is written again in
//! key order (byte order of the keys, `BTreeMap`'s; a key given twice keeps its last value, as
//! `BTreeMap::insert` does), keys and values, after its values, then moved over them. Nested
//! objects close before their parent moves on, so each object is ordered once. The buffers
//! (the text, the members, the kept keys) are the thread's, and last from one line to the next
//! (a line written while another is, by a value that writes one, gets buffers of its own).
//!
//! The order is worked out by insertion on the prefixes, or not at all: the records of a
//! trace come in a handful of shapes, each giving its keys in the same order every time (a
//! tagged record its tag first, then its fields as declared). An object whose keys are short
//! and whose prefixes all differ is ordered by its prefixes alone, and another bringing the
//! same prefixes and lengths in the same order has the same keys: the order of each such shape
//! is kept ([`Shapes`]), with its keys already written out (`,"key":`), and the next line of
//! the same record looks it up and copies the keys.
//!
//! Scalars are written as `serde_json` writes them: numbers by its formatter (`itoa`, `ryu`),
//! each escape by its formatter too, the text between escapes copied in runs once checked
//! eight octets at a time. A value formatted through `Display` (`collect_str`) is escaped
//! piece by piece as it is formatted rather than gathered in a `String` first. The text is
//! checked to be UTF-8 once, at the end (it always is; without `unsafe`, octets become a
//! `String` only checked).
//!
//! # Cost
//! On the trace of the `dumbbell4` simulation (100 ms, 2,541 lines), counted in instructions
//! (callgrind), a line took 7,564 before (per object a `Vec` of entries and a `String` of keys
//! allocated, every object sorted, every key checked for escapes at every line, every scalar
//! through a `serde_json` serializer of its own) and 3,398 now; about 6,400 if no order were
//! ever found again (more shapes in turn than are kept). Most of the rest is not this
//! writer's: serde's own work for tagged and flattened records, the records' `Display`
//! (addresses), the `String` of the line and its UTF-8 check. Measured and left out: digits
//! written here rather than by `itoa` (more instructions, not fewer), short strings copied as
//! fixed-size words (one per cent), keeping in place an object whose keys come in order (the
//! records' never do: the tag comes first).
//!
//! # What it leaves to `Value`
//! Whatever `serde_json::Value` would turn into something else than what it was given is
//! refused ([`Unsupported`]), and the caller falls back to the `Value` path: `f32` (a `Value`
//! widens it to `f64`, which prints other digits), non-finite floats, 128-bit integers,
//! byte strings, map keys that are not strings, `serde_json`'s raw values. The records of
//! this project have none of these; the fallback keeps the output right if one ever does.

use serde::ser::{self, Serialize};
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;

/// A value this writer leaves to `serde_json::Value` (see the module documentation), or an
/// error the value itself raised.
#[derive(Debug)]
pub(crate) struct Unsupported;

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not written by the sorted JSON writer")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Unsupported
    }
}

impl From<std::io::Error> for Unsupported {
    fn from(_: std::io::Error) -> Self {
        Unsupported
    }
}

/// `value` as compact JSON with sorted keys, or `None` when it needs the `Value` path.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    thread_local! {
        static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    }
    SCRATCH
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => scratch.line(value),
            // A value that writes a line of its own while being written.
            Err(_) => Scratch::default().line(value),
        })
        .unwrap_or_else(|_| Scratch::default().line(value))
}

/// The buffers a line is written with, kept from one line to the next.
#[derive(Default)]
struct Scratch {
    /// The text: an open object's values as they came, until it is closed and written in
    /// key order over them.
    out: Vec<u8>,
    /// The members of the open objects, innermost last: each object's own from its `base` on,
    /// as they came.
    members: Vec<Member>,
    /// The text of the keys longer than their prefix ([`Key::prefix`]).
    kept: Vec<u8>,
    /// An object's members in key order, as indices from its first: being worked out.
    order: Vec<u32>,
    /// The key orders already worked out, kept from one line to the next.
    shapes: Shapes,
}

/// Past this many octets the scratch text is let go after its line (a line this long is
/// rare, and its memory is not kept for the rest of the run).
const KEEP: usize = 1 << 16;

impl Scratch {
    fn line<T: Serialize + ?Sized>(&mut self, value: &T) -> Option<String> {
        self.out.clear();
        self.members.clear();
        self.kept.clear();
        let done = value.serialize(Writer { s: self });
        // Every octet written is either a `&str`'s or ASCII; checked rather than assumed.
        let line = match done {
            Ok(()) => std::str::from_utf8(&self.out).ok().map(str::to_owned),
            Err(Unsupported) => None,
        };
        if self.out.capacity() > KEEP {
            *self = Scratch::default();
        }
        line
    }
}

/// Whether JSON escapes octet `b` in a string: the control characters, `"` and `\`.
fn escaped(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// Whether none of the eight octets of `x` is one JSON escapes (a control character, `"` or
/// `\`): the word tricks that tell whether a word holds a zero octet or one below a bound,
/// exact as a yes or no for the whole word.
#[inline]
fn plain_word(x: u64) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let quote = x ^ (ONES * u64::from(b'"'));
    let backslash = x ^ (ONES * u64::from(b'\\'));
    let control = x.wrapping_sub(ONES * 0x20) & !x;
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    (control | quote | backslash) & HIGH == 0
}

/// Whether JSON writes `bytes` as they are: eight octets at a time, the last eight
/// overlapping the ones before; a shorter text as its first and last four, or octet by octet
/// below four.
#[inline]
fn is_plain(bytes: &[u8]) -> bool {
    if let Some(last) = bytes.last_chunk::<8>() {
        bytes.chunks_exact(8).all(|c| {
            c.first_chunk::<8>()
                .is_some_and(|w| plain_word(u64::from_le_bytes(*w)))
        }) && plain_word(u64::from_le_bytes(*last))
    } else if let (Some(head), Some(tail)) = (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        plain_word(
            u64::from(u32::from_le_bytes(*head)) | u64::from(u32::from_le_bytes(*tail)) << 32,
        )
    } else {
        !bytes.iter().any(|&b| escaped(b))
    }
}

/// `s` between quotes, escaped as `serde_json` escapes it.
fn write_str(out: &mut Vec<u8>, s: &str) -> Result<(), Unsupported> {
    out.push(b'"');
    write_str_contents(out, s)?;
    out.push(b'"');
    Ok(())
}

/// The text of `s` escaped, without the quotes: as it is when nothing in it needs escaping
/// (the common case, checked a word at a time).
#[inline]
fn write_str_contents(out: &mut Vec<u8>, s: &str) -> Result<(), Unsupported> {
    if is_plain(s.as_bytes()) {
        out.extend_from_slice(s.as_bytes());
        Ok(())
    } else {
        write_escaped(out, s.as_bytes())
    }
}

/// The escaped text of `s`, without the quotes: the octets JSON leaves alone copied in runs,
/// each escape written by `serde_json`'s own formatter.
fn write_escaped(out: &mut Vec<u8>, s: &[u8]) -> Result<(), Unsupported> {
    let mut rest = s;
    loop {
        let plain = rest.iter().take_while(|&&b| !escaped(b)).count();
        let (run, tail) = rest.split_at(plain);
        out.extend_from_slice(run);
        let Some((&b, after)) = tail.split_first() else {
            return Ok(());
        };
        let escape = match b {
            b'"' => CharEscape::Quote,
            b'\\' => CharEscape::ReverseSolidus,
            0x08 => CharEscape::Backspace,
            b'\t' => CharEscape::Tab,
            b'\n' => CharEscape::LineFeed,
            0x0c => CharEscape::FormFeed,
            b'\r' => CharEscape::CarriageReturn,
            _ => CharEscape::AsciiControl(b),
        };
        CompactFormatter.write_char_escape(out, escape)?;
        rest = after;
    }
}

/// The serializer: appends one value to the scratch text.
struct Writer<'a> {
    s: &'a mut Scratch,
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_bool(&mut self.s.out, v)?)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_i8(&mut self.s.out, v)?)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_i16(&mut self.s.out, v)?)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_i32(&mut self.s.out, v)?)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_i64(&mut self.s.out, v)?)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_u8(&mut self.s.out, v)?)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_u16(&mut self.s.out, v)?)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_u32(&mut self.s.out, v)?)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Unsupported> {
        Ok(CompactFormatter.write_u64(&mut self.s.out, v)?)
    }
    fn serialize_f32(self, _v: f32) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Unsupported> {
        if !v.is_finite() {
            return Err(Unsupported);
        }
        Ok(CompactFormatter.write_f64(&mut self.s.out, v)?)
    }
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        write_str(&mut self.s.out, v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        write_str(&mut self.s.out, v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        self.s.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Unsupported> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Unsupported> {
        write_str(&mut self.s.out, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        if name.starts_with("$serde_json") {
            return Err(Unsupported);
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        // An object of one key: nothing to sort.
        self.s.out.push(b'{');
        write_str(&mut self.s.out, variant)?;
        self.s.out.push(b':');
        value.serialize(Writer { s: &mut *self.s })?;
        self.s.out.push(b'}');
        Ok(())
    }
    /// Written as it is formatted, escaped piece by piece (a `Value` holds the whole text as
    /// a string, which escapes to the same octets), rather than into a `String` first.
    fn collect_str<T: fmt::Display + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        struct Escaping<'o>(&'o mut Vec<u8>);
        impl fmt::Write for Escaping<'_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                write_str_contents(self.0, s).map_err(|_| fmt::Error)
            }
        }
        self.s.out.push(b'"');
        fmt::write(&mut Escaping(&mut self.s.out), format_args!("{value}"))
            .map_err(|_| Unsupported)?;
        self.s.out.push(b'"');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, Unsupported> {
        self.s.out.push(b'[');
        Ok(Seq {
            s: self.s,
            first: true,
            close: b"]",
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, Unsupported> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Seq<'a>, Unsupported> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, Unsupported> {
        self.s.out.push(b'{');
        write_str(&mut self.s.out, variant)?;
        self.s.out.extend_from_slice(b":[");
        Ok(Seq {
            s: self.s,
            first: true,
            close: b"]}",
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>, Unsupported> {
        Ok(Object::new(self.s, b""))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Object<'a>, Unsupported> {
        if name.starts_with("$serde_json") {
            return Err(Unsupported);
        }
        Ok(Object::new(self.s, b""))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, Unsupported> {
        // `{"variant":{...}}`: the outer object has one key.
        self.s.out.push(b'{');
        write_str(&mut self.s.out, variant)?;
        self.s.out.push(b':');
        Ok(Object::new(self.s, b"}"))
    }
}

/// An array (or a tuple variant's array) being written.
struct Seq<'a> {
    s: &'a mut Scratch,
    first: bool,
    /// What closes it.
    close: &'static [u8],
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        if !self.first {
            self.s.out.push(b',');
        }
        self.first = false;
        value.serialize(Writer { s: &mut *self.s })
    }
    fn close(self) -> Result<(), Unsupported> {
        self.s.out.extend_from_slice(self.close);
        Ok(())
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.close()
    }
}

impl ser::SerializeTuple for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Seq<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        self.element(value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.close()
    }
}

/// An object being written: its members' values, as they come, from `start` on; the
/// members (keys, and where their values lie) in `members` from `base` on.
struct Object<'a> {
    s: &'a mut Scratch,
    start: usize,
    base: usize,
    /// The key given by `serialize_key`, waiting for its value.
    key: Option<Key>,
    /// What follows the object (the close of a struct variant's wrapper).
    close: &'static [u8],
}

/// A key, as given.
#[derive(Clone, Copy)]
struct Key {
    /// The key's first eight octets, big-endian, zero-padded: ordered as the keys are whenever
    /// the two differ (a key without NUL octets and its zero padding compare as the key does),
    /// so that ordering compares one number and reads the keys' text only on a tie. A key of
    /// eight octets or fewer is all there: its text is not kept elsewhere.
    prefix: u64,
    len: u32,
    /// Where a longer key's text was kept, in [`Scratch::kept`].
    kept: u32,
}

/// One member of an [`Object`]: its key and where its value's text lies in the scratch.
#[derive(Clone, Copy)]
struct Member {
    key: Key,
    from: u32,
    to: u32,
}

/// `n` as a position of the scratch (a line past 4 GiB is left to the `Value` path).
fn pos(n: usize) -> Result<u32, Unsupported> {
    u32::try_from(n).map_err(|_| Unsupported)
}

/// The first eight octets of `key` as one big-endian number, zero-padded. Read as one word,
/// or as two overlapping half-words (four to seven octets: where they overlap they are the
/// same octets), or as the first, middle and last octet (one to three: these are all of them).
#[inline]
fn prefix_of(key: &[u8]) -> u64 {
    let len = key.len();
    if let Some(head) = key.first_chunk::<8>() {
        u64::from_be_bytes(*head)
    } else if let (Some(head), Some(tail)) = (key.first_chunk::<4>(), key.last_chunk::<4>()) {
        u64::from(u32::from_be_bytes(*head)) << 32
            | u64::from(u32::from_be_bytes(*tail)) << (8 * (8 - len))
    } else if let (Some(&first), Some(&middle), Some(&last)) =
        (key.first(), key.get(len / 2), key.last())
    {
        u64::from(first) << 56
            | u64::from(middle) << (56 - 8 * (len / 2))
            | u64::from(last) << (56 - 8 * (len - 1))
    } else {
        0
    }
}

impl Key {
    /// The key of text `key`: a longer one than its prefix kept in `kept`.
    #[inline]
    fn new(key: &str, kept: &mut Vec<u8>) -> Result<Key, Unsupported> {
        let bytes = key.as_bytes();
        let mut k = Key {
            prefix: prefix_of(bytes),
            len: pos(bytes.len())?,
            kept: 0,
        };
        if bytes.len() > 8 {
            k.kept = pos(kept.len())?;
            kept.extend_from_slice(bytes);
        }
        Ok(k)
    }

    /// Calls `f` with the key's text.
    fn with_text<R>(&self, kept: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
        let len = self.len as usize;
        if len <= 8 {
            let head = self.prefix.to_be_bytes();
            f(head.get(..len).unwrap_or_default())
        } else {
            let from = self.kept as usize;
            f(kept.get(from..from + len).unwrap_or_default())
        }
    }

    /// The order of two keys.
    fn cmp(&self, other: &Key, kept: &[u8]) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.with_text(kept, |a| other.with_text(kept, |b| a.cmp(b))))
    }

    /// The key as a member of an object written: `"key":`, after a comma unless `first`.
    fn write(&self, out: &mut Vec<u8>, kept: &[u8], first: bool) -> Result<(), Unsupported> {
        if !first {
            out.push(b',');
        }
        out.push(b'"');
        self.with_text(kept, |text| write_escaped(out, text))?;
        out.extend_from_slice(b"\":");
        Ok(())
    }
}

impl<'a> Object<'a> {
    fn new(s: &'a mut Scratch, close: &'static [u8]) -> Self {
        let start = s.out.len();
        let base = s.members.len();
        Object {
            s,
            start,
            base,
            key: None,
            close,
        }
    }

    /// Writes a member's value and records it.
    #[inline]
    fn member<T: Serialize + ?Sized>(&mut self, key: Key, value: &T) -> Result<(), Unsupported> {
        let from = pos(self.s.out.len())?;
        value.serialize(Writer { s: &mut *self.s })?;
        let to = pos(self.s.out.len())?;
        self.s.members.push(Member { key, from, to });
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        let key = Key::new(key, &mut self.s.kept)?;
        self.member(key, value)
    }

    /// Writes the object in key order after its values, then moves it over them. Its order
    /// is looked up ([`Shapes`]) or worked out by sorting; of a key given twice the value
    /// given last is kept, as `BTreeMap::insert` keeps it.
    fn finish(self) -> Result<(), Unsupported> {
        let Object {
            s,
            start,
            base,
            key,
            close,
        } = self;
        if key.is_some() {
            return Err(Unsupported);
        }
        let Scratch {
            out,
            members,
            kept,
            order,
            shapes,
        } = s;
        let own = members.get(base..).unwrap_or_default();
        let sorted = out.len();
        out.push(b'{');
        let value = |m: &Member| {
            let (from, to) = (m.from as usize, m.to as usize);
            (from <= to && to <= sorted)
                .then_some(from..to)
                .ok_or(Unsupported)
        };
        if let Some(steps) = shapes.find(own) {
            for step in steps {
                let m = own.get(step.member as usize).ok_or(Unsupported)?;
                let end = out.len() + usize::from(step.len);
                out.extend_from_slice(&step.text);
                out.truncate(end);
                out.extend_from_within(value(m)?);
            }
        } else {
            sort(own, order, kept);
            // Whether the order can be kept for the next object of this shape (see
            // [`Shapes`]), with its keys as they are written here.
            let mut keep = own.len() <= SMALL;
            shapes.steps.clear();
            let mut first = true;
            let mut last = None;
            let mut ordered = order.iter().peekable();
            while let Some(&i) = ordered.next() {
                let m = own.get(i as usize).ok_or(Unsupported)?;
                let next = ordered.peek().and_then(|&&n| own.get(n as usize));
                if next.is_some_and(|n| n.key.cmp(&m.key, kept) == Ordering::Equal) {
                    // The same key given again: only the last is written.
                    keep = false;
                    continue;
                }
                let at = out.len();
                m.key.write(out, kept, first)?;
                first = false;
                keep = keep && m.key.len <= 8 && last != Some(m.key.prefix);
                last = Some(m.key.prefix);
                if keep {
                    // Sixteen octets hold a short key, and most escaped ones.
                    let written = out.get(at..).unwrap_or_default();
                    let mut text = [0u8; 16];
                    match (text.get_mut(..written.len()), u8::try_from(written.len())) {
                        (Some(head), Ok(len)) => {
                            head.copy_from_slice(written);
                            shapes.steps.push(Step {
                                member: i,
                                len,
                                text,
                            });
                        }
                        _ => keep = false,
                    }
                }
                out.extend_from_within(value(m)?);
            }
            if keep {
                shapes.keep(own);
            }
        }
        out.push(b'}');
        out.extend_from_slice(close);
        out.copy_within(sorted.., start);
        out.truncate(start + out.len() - sorted);
        members.truncate(base);
        Ok(())
    }
}

/// Puts in `order` the indices of `own` in key order: stable, so of a key given twice the
/// last given comes last (and is the one kept). By insertion up to [`SMALL`] members, by the
/// standard library's stable sort past that.
fn sort(own: &[Member], order: &mut Vec<u32>, kept: &[u8]) {
    order.clear();
    order.extend((0..own.len()).filter_map(|i| u32::try_from(i).ok()));
    let cmp = |a: u32, b: u32| match (own.get(a as usize), own.get(b as usize)) {
        (Some(a), Some(b)) => a.key.cmp(&b.key, kept),
        _ => Ordering::Equal,
    };
    if order.len() <= SMALL {
        for i in 1..order.len() {
            let m = order[i];
            let mut at = i;
            while at > 0 && cmp(order[at - 1], m) == Ordering::Greater {
                order[at] = order[at - 1];
                at -= 1;
            }
            order[at] = m;
        }
    } else {
        order.sort_by(|&a, &b| cmp(a, b));
    }
}

/// Up to this many members an object is sorted by insertion (the records' objects have a
/// dozen at most) and its order kept; a larger one by the standard library's stable sort.
const SMALL: usize = 24;

/// Key orders already worked out. An object whose keys are short (eight octets or fewer: such
/// a key is its prefix and length) and have prefixes that all differ is ordered by its
/// prefixes alone: another object whose keys come as the same prefixes and lengths in the same
/// order (another line of the same record) has the same keys, to write in the same order. Its
/// order is kept here, with each key already written out (`,"key":`), so that the next one is
/// looked up rather than sorted, and its keys copied rather than checked for escapes.
#[derive(Default)]
struct Shapes {
    /// The shapes' hashes ([`hash`]), scanned first.
    hashes: Vec<u64>,
    known: Vec<Shape>,
    /// The one to replace next when all are taken.
    next: usize,
    /// The steps of a shape being worked out.
    steps: Vec<Step>,
}

/// An object's keys as they came (prefix and length), and how it is written.
#[derive(Default)]
struct Shape {
    keys: Vec<(u64, u32)>,
    steps: Vec<Step>,
}

/// One member of a [`Shape`] in key order: which one it is (as it came), and its key written
/// out, with the comma before it but for the first.
#[derive(Clone, Copy)]
struct Step {
    member: u32,
    len: u8,
    text: [u8; 16],
}

/// How many key orders are kept (the records of a trace have a handful of shapes; past this
/// many in turn, the oldest is replaced).
const SHAPES: usize = 64;

/// A summary of the keys, to pass over the shapes that cannot match at one comparison.
fn hash(own: &[Member]) -> u64 {
    own.iter().fold(own.len() as u64, |h, m| {
        h.rotate_left(5) ^ m.key.prefix ^ u64::from(m.key.len)
    })
}

impl Shapes {
    fn find(&self, own: &[Member]) -> Option<&[Step]> {
        let hash = hash(own);
        self.hashes
            .iter()
            .zip(&self.known)
            .find(|&(&h, s)| {
                h == hash
                    && s.keys.len() == own.len()
                    && s.keys
                        .iter()
                        .zip(own)
                        .all(|(&(prefix, len), m)| prefix == m.key.prefix && len == m.key.len)
            })
            .map(|(_, s)| &s.steps[..])
    }

    /// Keeps the steps worked out for `own`, in place of the oldest when all are taken.
    fn keep(&mut self, own: &[Member]) {
        let slot = if self.known.len() < SHAPES {
            self.hashes.push(0);
            self.known.push(Shape::default());
            self.known.len() - 1
        } else {
            let slot = self.next;
            self.next = (slot + 1) % SHAPES;
            slot
        };
        if let (Some(h), Some(shape)) = (self.hashes.get_mut(slot), self.known.get_mut(slot)) {
            *h = hash(own);
            shape.keys.clear();
            shape
                .keys
                .extend(own.iter().map(|m| (m.key.prefix, m.key.len)));
            shape.steps.clear();
            shape.steps.extend_from_slice(&self.steps);
        }
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        if self.key.is_some() {
            return Err(Unsupported);
        }
        self.key = Some(key.serialize(KeyWriter { s: &mut *self.s })?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        let key = self.key.take().ok_or(Unsupported)?;
        self.member(key, value)
    }
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), Unsupported> {
        if self.key.is_some() {
            return Err(Unsupported);
        }
        let key = key.serialize(KeyWriter { s: &mut *self.s })?;
        self.member(key, value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.finish()
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Object<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.finish()
    }
}

/// A map key: strings only (a `Value` turns other keys into strings its own way).
struct KeyWriter<'k> {
    s: &'k mut Scratch,
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = Key;
    type Error = Unsupported;
    type SerializeSeq = ser::Impossible<Key, Unsupported>;
    type SerializeTuple = ser::Impossible<Key, Unsupported>;
    type SerializeTupleStruct = ser::Impossible<Key, Unsupported>;
    type SerializeTupleVariant = ser::Impossible<Key, Unsupported>;
    type SerializeMap = ser::Impossible<Key, Unsupported>;
    type SerializeStruct = ser::Impossible<Key, Unsupported>;
    type SerializeStructVariant = ser::Impossible<Key, Unsupported>;

    fn serialize_str(self, v: &str) -> Result<Key, Unsupported> {
        Key::new(v, &mut self.s.kept)
    }
    fn serialize_bool(self, _v: bool) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i8(self, _v: i8) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i16(self, _v: i16) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i32(self, _v: i32) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i64(self, _v: i64) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u8(self, _v: u8) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u16(self, _v: u16) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u32(self, _v: u32) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u64(self, _v: u64) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_f32(self, _v: f32) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_f64(self, _v: f64) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_char(self, _v: char) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_none(self) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit(self) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<Key, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Unsupported> {
        Err(Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use std::collections::{BTreeMap, HashMap};

    /// What the `Value` path writes.
    fn reference<T: Serialize>(v: &T) -> String {
        serde_json::to_value(v).unwrap().to_string()
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Inner {
        Alpha { z: u8, a: Option<String> },
        Beta { list: Vec<i64> },
        Gamma,
    }

    #[derive(Serialize)]
    enum External {
        Unit,
        New(u32),
        Tuple(u8, String),
        Struct { y: bool, b: f64 },
    }

    #[derive(Serialize)]
    struct Wrapped(u16);

    #[derive(Serialize)]
    struct Outer {
        zeta: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        alpha: &'static str,
        #[serde(flatten)]
        inner: Inner,
        externals: Vec<External>,
        wrapped: Wrapped,
        tuple: (i8, char, ()),
        map: BTreeMap<String, i32>,
        hash: HashMap<String, u8>,
        nested: Vec<BTreeMap<String, Vec<f64>>>,
    }

    fn outer(inner: Inner) -> Outer {
        let mut hash = HashMap::new();
        // Keys that tie on their first eight octets (and a NUL, which ties with the padding)
        // are ordered by their whole text.
        for (i, k) in [
            "q",
            "b",
            "é",
            "a\"b",
            "\u{1}",
            "B",
            "bb",
            "",
            "\0",
            "b\0",
            "abcdefgh1",
            "abcdefgh0",
            "abcdefgh",
            "abcdefg",
            "abcdefgh\0",
        ]
        .iter()
        .enumerate()
        {
            hash.insert((*k).to_string(), i as u8);
        }
        Outer {
            zeta: u64::MAX,
            skipped: None,
            alpha: "tab\there \\ \"quoted\" ünï",
            inner,
            externals: vec![
                External::Unit,
                External::New(7),
                External::Tuple(1, "x".into()),
                External::Struct { y: true, b: -0.5 },
            ],
            wrapped: Wrapped(9),
            tuple: (-3, 'ç', ()),
            map: [("k2".to_string(), -1), ("k1".to_string(), 2)].into(),
            hash,
            nested: vec![[("w".into(), vec![1.0, 1e300, 0.1]), ("v".into(), vec![])].into()],
        }
    }

    #[test]
    fn same_bytes_as_through_a_value() {
        for inner in [
            Inner::Alpha {
                z: 1,
                a: Some("s".into()),
            },
            Inner::Alpha { z: 2, a: None },
            Inner::Beta {
                list: vec![i64::MIN, 0, 5],
            },
            Inner::Gamma,
        ] {
            let v = outer(inner);
            assert_eq!(to_string(&v).as_deref(), Some(reference(&v).as_str()));
        }
    }

    /// A key given twice keeps the value given last, in the first one's place in the order.
    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        #[derive(Serialize)]
        struct Twice {
            b: u8,
            #[serde(flatten)]
            more: BTreeMap<String, u8>,
        }
        let v = Twice {
            b: 1,
            more: [("b".to_string(), 2), ("a".to_string(), 3)].into(),
        };
        assert_eq!(to_string(&v).as_deref(), Some(r#"{"a":3,"b":2}"#));
        assert_eq!(reference(&v), r#"{"a":3,"b":2}"#);
    }

    /// What a `Value` would change is left to it.
    #[test]
    fn values_a_value_would_change_are_refused() {
        assert_eq!(to_string(&1.5f32), None);
        assert_eq!(to_string(&f64::NAN), None);
        assert_eq!(to_string(&u128::MAX), None);
        assert_eq!(to_string(&BTreeMap::from([(1u8, 2u8)])), None);
        // Plain scalars are written as serde_json writes them.
        assert_eq!(to_string(&0.1f64).as_deref(), Some("0.1"));
        assert_eq!(to_string("a\nb").as_deref(), Some(r#""a\nb""#));
    }

    /// A map written entry by entry, in the order given (keys may repeat).
    struct Entries(Vec<(&'static str, i64)>);

    impl Serialize for Entries {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
        }
    }

    /// The same, given as `serialize_key` then `serialize_value`.
    struct KeyThenValue(Vec<(String, i64)>);

    impl Serialize for KeyThenValue {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(None)?;
            for (k, v) in &self.0 {
                map.serialize_key(k)?;
                map.serialize_value(v)?;
            }
            map.end()
        }
    }

    /// Keys given in order come out as they are; given in another order, sorted; and a record
    /// written again (its order now known) comes out the same.
    #[test]
    fn keys_in_order_out_of_order_and_again() {
        #[derive(Serialize)]
        struct InOrder {
            a: u8,
            b: &'static str,
            c: bool,
        }
        #[derive(Serialize)]
        struct Reversed {
            c: bool,
            b: &'static str,
            a: u8,
        }
        for _ in 0..3 {
            let in_order = InOrder {
                a: 1,
                b: "x",
                c: true,
            };
            let reversed = Reversed {
                c: true,
                b: "x",
                a: 1,
            };
            assert_eq!(
                to_string(&in_order).as_deref(),
                Some(r#"{"a":1,"b":"x","c":true}"#)
            );
            assert_eq!(
                to_string(&reversed).as_deref(),
                Some(r#"{"a":1,"b":"x","c":true}"#)
            );
        }
        assert_eq!(to_string(&Entries(vec![])).as_deref(), Some("{}"));
    }

    /// Objects in objects, in arrays, each sorted on its own, however deep.
    #[test]
    fn nested_objects_are_sorted_each() {
        #[derive(Serialize)]
        struct Leaf {
            z: u8,
            y: u8,
        }
        #[derive(Serialize)]
        struct Mid {
            m: Vec<Leaf>,
            k: Leaf,
        }
        #[derive(Serialize)]
        struct Top {
            t: Mid,
            s: Option<Leaf>,
            r: Vec<Mid>,
        }
        let top = Top {
            t: Mid {
                m: vec![Leaf { z: 1, y: 2 }, Leaf { z: 7, y: 8 }],
                k: Leaf { z: 3, y: 4 },
            },
            s: None,
            r: vec![Mid {
                m: vec![],
                k: Leaf { z: 5, y: 6 },
            }],
        };
        let expected = concat!(
            r#"{"r":[{"k":{"y":6,"z":5},"m":[]}],"s":null,"#,
            r#""t":{"k":{"y":4,"z":3},"m":[{"y":2,"z":1},{"y":8,"z":7}]}}"#
        );
        for _ in 0..2 {
            assert_eq!(to_string(&top).as_deref(), Some(expected));
        }
        assert_eq!(reference(&top), expected);
    }

    /// Of a key given more than once the last value is kept, in the key's place in the order,
    /// by either way of giving map entries; and an object with a repeated key is never taken
    /// for one of the same shape without.
    #[test]
    fn repeated_keys_keep_the_last_value() {
        let entries = [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("b", 5)];
        for _ in 0..2 {
            assert_eq!(
                to_string(&Entries(entries.to_vec())).as_deref(),
                Some(r#"{"a":2,"b":5,"c":4}"#)
            );
            let given = entries.iter().map(|&(k, v)| (k.to_string(), v)).collect();
            assert_eq!(
                to_string(&KeyThenValue(given)).as_deref(),
                Some(r#"{"a":2,"b":5,"c":4}"#)
            );
            assert_eq!(
                to_string(&Entries(vec![("b", 1), ("a", 2), ("c", 4)])).as_deref(),
                Some(r#"{"a":2,"b":1,"c":4}"#)
            );
        }
    }

    /// Keys that a known shape could be mistaken for: the same prefix and another length, or
    /// longer than their prefix and tied on it.
    #[test]
    fn keys_tied_on_their_prefix_are_told_apart() {
        let cases: [&[(&'static str, i64)]; 6] = [
            &[("b", 1), ("a", 2)],
            &[("b", 1), ("a\0", 2)],
            &[("b", 1), ("a", 2), ("a\0", 3)],
            &[("abcdefgh1", 1), ("abcdefgh0", 2), ("abcdefgh", 3)],
            &[("abcdefgh0", 1), ("abcdefgh1", 2), ("abcdefgh", 3)],
            &[("abcdefgh", 1), ("abcdefg", 2), ("abcdefgh\0", 3)],
        ];
        for _ in 0..2 {
            for case in cases {
                let v = Entries(case.to_vec());
                assert_eq!(to_string(&v).as_deref(), Some(reference(&v).as_str()));
            }
        }
        assert_eq!(
            to_string(&Entries(cases[3].to_vec())).as_deref(),
            Some(r#"{"abcdefgh":3,"abcdefgh0":2,"abcdefgh1":1}"#)
        );
    }

    /// More shapes than are kept, in turn; and objects too large to keep the order of.
    #[test]
    fn many_shapes_and_large_objects() {
        let names: Vec<&'static str> = (0..2 * SHAPES + 3)
            .map(|i| &*format!("k{i}").leak())
            .collect();
        for _ in 0..3 {
            for pair in names.windows(2) {
                let v = Entries(vec![(pair[1], 1), (pair[0], 2), ("a", 3)]);
                assert_eq!(to_string(&v).as_deref(), Some(reference(&v).as_str()));
            }
        }
        let large: HashMap<String, usize> =
            (0..3 * SMALL).map(|i| (format!("key{i}"), i)).collect();
        assert_eq!(
            to_string(&large).as_deref(),
            Some(reference(&large).as_str())
        );
        let given = (0..3 * SMALL)
            .rev()
            .map(|i| (format!("k{}", i % SMALL), i as i64))
            .collect();
        let v = KeyThenValue(given);
        assert_eq!(to_string(&v).as_deref(), Some(reference(&v).as_str()));
    }

    /// Every ASCII octet, at every place of texts up to twenty octets long, as a string and as
    /// a key: escaped as `serde_json` escapes it.
    #[test]
    fn escapes_are_serde_jsons() {
        for len in 1..=20 {
            for at in 0..len {
                for b in 0..0x80u8 {
                    let mut text = vec![b'x'; len];
                    text[at] = b;
                    let text = String::from_utf8(text).unwrap();
                    let expected = serde_json::to_string(&text).unwrap();
                    assert_eq!(to_string(&text), Some(expected.clone()), "{text:?}");
                    let map = KeyThenValue(vec![(text.clone(), 0), ("~".into(), 1)]);
                    assert_eq!(to_string(&map), Some(reference(&map)), "{text:?}");
                }
            }
        }
        for text in [
            "é",
            "ü\u{1}ï",
            "\u{7f}\u{80}",
            "日本語\t",
            "\u{10FFFF}\"\\/",
        ] {
            assert_eq!(to_string(text), Some(serde_json::to_string(text).unwrap()));
            let map = KeyThenValue(vec![(text.into(), 0)]);
            assert_eq!(to_string(&map), Some(reference(&map)));
        }
    }

    /// The word check agrees with the octet one, for every octet at every place.
    #[test]
    fn the_word_check_is_exact() {
        for len in 0..=20 {
            for at in 0..len.max(1) {
                for b in 0..=255u8 {
                    let mut text = vec![b' '; len];
                    if let Some(t) = text.get_mut(at) {
                        *t = b;
                    }
                    assert_eq!(
                        is_plain(&text),
                        text.iter().all(|&b| !escaped(b)),
                        "{text:?}"
                    );
                }
            }
        }
    }

    /// The prefix is the first eight octets, zero-padded, whatever the length.
    #[test]
    fn prefixes() {
        let text: Vec<u8> = (1..=12).collect();
        for len in 0..=12 {
            let mut head = [0u8; 8];
            for (h, t) in head.iter_mut().zip(&text[..len]) {
                *h = *t;
            }
            assert_eq!(prefix_of(&text[..len]), u64::from_be_bytes(head), "{len}");
        }
        assert_eq!(prefix_of(b"abc"), 0x6162_6300_0000_0000);
    }

    /// A value formatted through `Display` (`collect_str`), piece by piece.
    #[test]
    fn displayed_values() {
        struct Pieces;
        impl fmt::Display for Pieces {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a")?;
                write!(f, ":{:02x}", 7)?;
                f.write_str("\"")?;
                fmt::Display::fmt(&'ü', f)?;
                f.write_str("\n")
            }
        }
        impl Serialize for Pieces {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        assert_eq!(to_string(&Pieces).as_deref(), Some(r#""a:07\"ü\n""#));
        assert_eq!(to_string(&Pieces), Some(reference(&Pieces)));
    }

    /// A value that writes a line of its own while it is being written, and a line longer than
    /// the scratch keeps.
    #[test]
    fn nested_lines_and_long_lines() {
        struct Quoting;
        impl Serialize for Quoting {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let inner = to_string(&Entries(vec![("y", 1), ("x", 2)])).unwrap_or_default();
                let mut st = s.serialize_struct("Quoting", 2)?;
                st.serialize_field("q", &inner)?;
                st.serialize_field("p", &0)?;
                st.end()
            }
        }
        assert_eq!(
            to_string(&Quoting).as_deref(),
            Some(r#"{"p":0,"q":"{\"x\":2,\"y\":1}"}"#)
        );
        let long = Entries(vec![("z", 1), ("y", 2)]);
        let text = "w".repeat(2 * KEEP);
        let line = to_string(&(&text, &long)).unwrap();
        assert_eq!(line.len(), 2 * KEEP + 18);
        assert_eq!(to_string(&long).as_deref(), Some(r#"{"y":2,"z":1}"#));
    }

    /// Integers at their bounds, as `serde_json` writes them.
    #[test]
    fn integers() {
        let v = (
            i8::MIN,
            i16::MIN,
            i32::MIN,
            i64::MIN,
            u8::MAX,
            u16::MAX,
            u32::MAX,
            u64::MAX,
        );
        assert_eq!(to_string(&v), Some(serde_json::to_string(&v).unwrap()));
        let v = (
            0i64, -1i64, 9u64, 10u64, 99u64, 100u64, 1e15f64, -0.0f64, 2.5e-8f64, true,
        );
        assert_eq!(to_string(&v), Some(serde_json::to_string(&v).unwrap()));
    }
}
