//! Compact JSON with every object's keys sorted, written straight from a `Serialize` value.
//!
//! # Why
//! A trace line is a record with its keys sorted ([`crate::trace_record`]): the lines are byte
//! for byte what the writers produced when they went through a `serde_json::Value`, whose
//! objects are `BTreeMap`s. Building that tree for every line (a `String` per key, a node per
//! value, a map per object) and printing it costs more than the record's own work on a busy
//! simulated switch. This serializer writes the same bytes without the tree.
//!
//! # How
//! Scalars are formatted by `serde_json` itself (so numbers and escapes are its own). An
//! object's values are written one after another behind the object's start as they come,
//! each remembered with its key and where its text lies; at the object's end that text is
//! taken off and the object written in key order (byte order of the keys, `BTreeMap`'s; a key
//! given twice keeps its last value, as `BTreeMap::insert` does). Nested objects are finished
//! before their parent moves on, so each object is sorted once.
//!
//! # What it leaves to `Value`
//! Whatever `serde_json::Value` would turn into something else than what it was given is
//! refused ([`Unsupported`]), and the caller falls back to the `Value` path: `f32` (a `Value`
//! widens it to `f64`, which prints other digits), non-finite floats, 128-bit integers,
//! byte strings, map keys that are not strings, `serde_json`'s raw values. The records of
//! this project have none of these; the fallback keeps the output right if one ever does.

use serde::ser::{self, Serialize};
use std::fmt;
use std::ops::Range;

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

/// `value` as compact JSON with sorted keys, or `None` when it needs the `Value` path.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    let mut out = Vec::with_capacity(128);
    value.serialize(Writer { out: &mut out }).ok()?;
    // serde_json writes UTF-8 only; checked rather than assumed.
    String::from_utf8(out).ok()
}

/// A scalar as `serde_json` writes it.
fn scalar<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) -> Result<(), Unsupported> {
    serde_json::to_writer(out, v).map_err(|_| Unsupported)
}

/// The serializer: appends one value to `out`.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
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
        scalar(self.out, &v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_f32(self, _v: f32) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Unsupported> {
        if !v.is_finite() {
            return Err(Unsupported);
        }
        scalar(self.out, &v)
    }
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        scalar(self.out, &v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        scalar(self.out, v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        self.out.extend_from_slice(b"null");
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
        scalar(self.out, variant)
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
        self.out.push(b'{');
        scalar(self.out, variant)?;
        self.out.push(b':');
        value.serialize(Writer {
            out: &mut *self.out,
        })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, Unsupported> {
        self.out.push(b'[');
        Ok(Seq {
            out: self.out,
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
        self.out.push(b'{');
        scalar(self.out, variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Seq {
            out: self.out,
            first: true,
            close: b"]}",
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>, Unsupported> {
        Ok(Object::new(self.out, b""))
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Object<'a>, Unsupported> {
        if name.starts_with("$serde_json") {
            return Err(Unsupported);
        }
        Ok(Object::new(self.out, b""))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, Unsupported> {
        // `{"variant":{...}}`: the outer object has one key.
        self.out.push(b'{');
        scalar(self.out, variant)?;
        self.out.push(b':');
        Ok(Object::new(self.out, b"}"))
    }
}

/// An array (or a tuple variant's array) being written.
struct Seq<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// What closes it.
    close: &'static [u8],
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Writer {
            out: &mut *self.out,
        })
    }
    fn close(self) -> Result<(), Unsupported> {
        self.out.extend_from_slice(self.close);
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

/// An object being written: its values so far lie in `out` from `start` on, unordered.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    /// Each key with where its value's text lies in `out`, counted from `start`.
    entries: Vec<Entry>,
    /// The text of the keys given by `serialize_key` (a flattened or tagged record's fields, a
    /// map's keys), one after another: written here rather than into a `String` each.
    keys: String,
    /// The key given by `serialize_key`, waiting for its value: where it lies in `keys`.
    key: Option<Range<usize>>,
    /// What follows the object (the close of a struct variant's wrapper).
    close: &'static [u8],
}

/// One key of an [`Object`] and where its value's text lies.
struct Entry {
    /// The key's first eight octets, big-endian, zero-padded: ordered as the keys are whenever
    /// the two differ (a key without NUL octets and its zero padding compare as the key does),
    /// so that sorting compares one number and reads the keys' text only on a tie.
    prefix: u64,
    key: Key,
    value: Range<usize>,
}

/// Where a key's text is: a struct's field name (borrowed, never copied), or a range of the
/// object's `keys`.
#[derive(Clone)]
enum Key {
    Field(&'static str),
    Given(Range<usize>),
}

impl Key {
    fn text<'k>(&self, keys: &'k str) -> &'k str {
        match self {
            Key::Field(k) => k,
            Key::Given(r) => keys.get(r.clone()).unwrap_or(""),
        }
    }
}

/// The first eight octets of `key` as one big-endian number, zero-padded.
fn prefix_of(key: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key.as_bytes()[..n]);
    u64::from_be_bytes(b)
}

impl<'a> Object<'a> {
    fn new(out: &'a mut Vec<u8>, close: &'static [u8]) -> Self {
        let start = out.len();
        Object {
            out,
            start,
            entries: Vec::with_capacity(16),
            keys: String::new(),
            key: None,
            close,
        }
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: Key, value: &T) -> Result<(), Unsupported> {
        // Where the value's text lies, from the object's start.
        let from = self.out.len() - self.start;
        value.serialize(Writer {
            out: &mut *self.out,
        })?;
        let prefix = prefix_of(key.text(&self.keys));
        self.entries.push(Entry {
            prefix,
            key,
            value: from..self.out.len() - self.start,
        });
        Ok(())
    }

    /// Writes the object in key order in place of its unordered values: written after them,
    /// then moved over them (no buffer of its own).
    fn finish(self) -> Result<(), Unsupported> {
        let Object {
            out,
            start,
            mut entries,
            keys,
            close,
            ..
        } = self;
        let sorted = out.len();
        // Stable: of equal keys the last given comes last, and is the one kept.
        entries.sort_by(|a, b| {
            a.prefix
                .cmp(&b.prefix)
                .then_with(|| a.key.text(&keys).cmp(b.key.text(&keys)))
        });
        out.push(b'{');
        let mut first = true;
        for (i, e) in entries.iter().enumerate() {
            let key = e.key.text(&keys);
            if entries
                .get(i + 1)
                .is_some_and(|n| n.prefix == e.prefix && n.key.text(&keys) == key)
            {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            write_key(out, key)?;
            out.push(b':');
            let (from, to) = (start + e.value.start, start + e.value.end);
            if to > sorted || from > to {
                return Err(Unsupported);
            }
            out.extend_from_within(from..to);
        }
        out.push(b'}');
        out.extend_from_slice(close);
        out.copy_within(sorted.., start);
        let len = out.len() - (sorted - start);
        out.truncate(len);
        Ok(())
    }
}

/// A key as `serde_json` writes a string: quoted, and escaped where it must be (a key of
/// letters, digits and `_` needs no escape and is copied as it is).
fn write_key(out: &mut Vec<u8>, key: &str) -> Result<(), Unsupported> {
    if key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        scalar(out, key)
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        let from = self.keys.len();
        key.serialize(KeyWriter {
            keys: &mut self.keys,
        })?;
        self.key = Some(from..self.keys.len());
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        let key = self.key.take().ok_or(Unsupported)?;
        self.entry(Key::Given(key), value)
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
        self.entry(Key::Field(key), value)
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
        self.entry(Key::Field(key), value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.finish()
    }
}

/// A map key: strings only (a `Value` turns other keys into strings its own way), appended
/// to the object's key text.
struct KeyWriter<'k> {
    keys: &'k mut String,
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = ser::Impossible<(), Unsupported>;
    type SerializeTuple = ser::Impossible<(), Unsupported>;
    type SerializeTupleStruct = ser::Impossible<(), Unsupported>;
    type SerializeTupleVariant = ser::Impossible<(), Unsupported>;
    type SerializeMap = ser::Impossible<(), Unsupported>;
    type SerializeStruct = ser::Impossible<(), Unsupported>;
    type SerializeStructVariant = ser::Impossible<(), Unsupported>;

    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        self.keys.push_str(v);
        Ok(())
    }
    fn serialize_bool(self, _v: bool) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i8(self, _v: i8) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i16(self, _v: i16) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i32(self, _v: i32) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_i64(self, _v: i64) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u8(self, _v: u8) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u16(self, _v: u16) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u32(self, _v: u32) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u64(self, _v: u64) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_f32(self, _v: f32) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_f64(self, _v: f64) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_char(self, _v: char) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Unsupported> {
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
}
