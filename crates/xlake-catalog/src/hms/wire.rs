//! One Thrift call over the binary protocol (Apache's `thrift` crate), with arguments and
//! replies as [`Value`]s of any shape rather than structs generated from one version of
//! `hive_metastore.thrift`: a table read from the metastore is written back with every field
//! it came with, including those a newer server added, which generated code for an older
//! IDL would drop on `alter_table`.

use std::io::{BufReader, BufWriter};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use thrift::protocol::{
    TBinaryInputProtocol, TBinaryOutputProtocol, TFieldIdentifier, TInputProtocol, TListIdentifier,
    TMapIdentifier, TMessageIdentifier, TMessageType, TOutputProtocol, TSetIdentifier,
    TStructIdentifier, TType,
};

/// Nesting a reply may have (a metastore table nests about five deep).
const MAX_DEPTH: usize = 64;

/// The longest string a reply may hold (a table parameter is at most a few tens of KB). The
/// `thrift` crate's own string reader trusts the length prefix (a negative one panics, a
/// huge one allocates it), so strings and the message header are read here.
const MAX_STRING: i32 = 16 << 20;

/// A Thrift value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Bool(bool),
    Byte(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    Double(f64),
    /// `string` and `binary`.
    Bytes(Vec<u8>),
    /// Fields by id, in the order read.
    Struct(Vec<(i16, Value)>),
    List(TType, Vec<Value>),
    Set(TType, Vec<Value>),
    Map(TType, TType, Vec<(Value, Value)>),
}

impl Value {
    pub(crate) fn str(s: &str) -> Self {
        Value::Bytes(s.as_bytes().to_vec())
    }

    /// A `map<string,string>`.
    pub(crate) fn string_map<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let pairs = pairs
            .into_iter()
            .map(|(k, v)| (Value::str(k), Value::str(v)))
            .collect();
        Value::Map(TType::String, TType::String, pairs)
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// Field `id` of a struct.
    pub(crate) fn field(&self, id: i16) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(i, _)| *i == id).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Set field `id` of a struct (added when absent); no-op on anything else.
    pub(crate) fn set(&mut self, id: i16, value: Value) {
        if let Value::Struct(fields) = self {
            match fields.iter_mut().find(|(i, _)| *i == id) {
                Some((_, v)) => *v = value,
                None => fields.push((id, value)),
            }
        }
    }

    /// The value under the string key `key` of a map.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(_, _, pairs) => pairs
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Put `key` = `value` into a `map<string,string>` (replacing an entry of that key).
    pub(crate) fn put(&mut self, key: &str, value: &str) {
        if let Value::Map(_, _, pairs) = self {
            pairs.retain(|(k, _)| k.as_str() != Some(key));
            pairs.push((Value::str(key), Value::str(value)));
        }
    }

    fn ttype(&self) -> TType {
        match self {
            Value::Bool(_) => TType::Bool,
            Value::Byte(_) => TType::I08,
            Value::I16(_) => TType::I16,
            Value::I32(_) => TType::I32,
            Value::I64(_) => TType::I64,
            Value::Double(_) => TType::Double,
            Value::Bytes(_) => TType::String,
            Value::Struct(_) => TType::Struct,
            Value::List(..) => TType::List,
            Value::Set(..) => TType::Set,
            Value::Map(..) => TType::Map,
        }
    }
}

/// What a call returned: field 0 of the reply (`None` for `void`), or the declared
/// exception in field `id` with its `message` (field 1 of every metastore exception).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Returned(Option<Value>),
    Thrown(i16, String),
}

/// Why a call on the metastore failed; each names the method or the address, and keeps
/// the error of the socket or of the Thrift protocol beneath.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WireError {
    /// The address does not resolve.
    #[error("{address}: {source}")]
    Resolve {
        address: String,
        #[source]
        source: std::io::Error,
    },
    /// The address resolves to nothing.
    #[error("{address}: no address")]
    NoAddress { address: String },
    /// No connection could be made.
    #[error("{method}: unreachable ({address}): {source}")]
    Unreachable {
        method: String,
        address: String,
        #[source]
        source: std::io::Error,
    },
    /// The connection failed while the call was sent or its reply read.
    #[error("{method}: {source}")]
    Io {
        method: String,
        #[source]
        source: std::io::Error,
    },
    /// The reply broke the protocol.
    #[error("{method}: {source}")]
    Protocol {
        method: String,
        #[source]
        source: thrift::Error,
    },
    /// The server answered with an exception message instead of a reply.
    #[error("{method}: the server answered: {text}")]
    Exception { method: String, text: String },
    /// The reply is not a struct.
    #[error("the reply is not a struct")]
    NotAStruct,
}

/// Call `method` on the server at `address` (host:port) over a new connection, with the
/// arguments as fields 1, 2, … of the call's argument struct.
pub(crate) fn call(
    address: &str,
    method: &str,
    args: Vec<Value>,
    timeout: Duration,
) -> Result<Outcome, WireError> {
    let addr = address
        .to_socket_addrs()
        .map_err(|source| WireError::Resolve {
            address: address.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| WireError::NoAddress {
            address: address.to_string(),
        })?;
    let stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|source| WireError::Unreachable {
            method: method.to_string(),
            address: address.to_string(),
            source,
        })?;
    let io = |source| WireError::Io {
        method: method.to_string(),
        source,
    };
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let write = stream.try_clone().map_err(io)?;
    let mut output = TBinaryOutputProtocol::new(BufWriter::new(write), true);
    let mut input = TBinaryInputProtocol::new(BufReader::new(stream), true);
    let fields = args
        .into_iter()
        .enumerate()
        .map(|(i, v)| (i as i16 + 1, v))
        .collect();
    let thrift = |source| WireError::Protocol {
        method: method.to_string(),
        source,
    };
    let message = TMessageIdentifier::new(method, TMessageType::Call, 1);
    output.write_message_begin(&message).map_err(thrift)?;
    write_value(&mut output, &Value::Struct(fields)).map_err(thrift)?;
    output.write_message_end().map_err(thrift)?;
    output.flush().map_err(thrift)?;
    let reply = read_message_begin(&mut input).map_err(thrift)?;
    let body = read_value(&mut input, TType::Struct, 0).map_err(thrift)?;
    input.read_message_end().map_err(thrift)?;
    if reply.message_type == TMessageType::Exception {
        let text = body.field(1).and_then(Value::as_str).unwrap_or("");
        return Err(WireError::Exception {
            method: method.to_string(),
            text: text.to_string(),
        });
    }
    outcome(body)
}

fn outcome(body: Value) -> Result<Outcome, WireError> {
    let Value::Struct(fields) = body else {
        return Err(WireError::NotAStruct);
    };
    match fields.into_iter().next() {
        None => Ok(Outcome::Returned(None)),
        Some((0, v)) => Ok(Outcome::Returned(Some(v))),
        Some((id, e)) => {
            let text = e.field(1).and_then(Value::as_str).unwrap_or("").to_string();
            Ok(Outcome::Thrown(id, text))
        }
    }
}

/// The strict binary protocol's message header: version and type, name, sequence number.
fn read_message_begin(p: &mut dyn TInputProtocol) -> thrift::Result<TMessageIdentifier> {
    let header = p.read_i32()?;
    if header as u32 & 0xffff_0000 != 0x8001_0000 {
        return Err(protocol_error("not a Thrift binary-protocol reply"));
    }
    let kind = TMessageType::try_from((header & 0xff) as u8)?;
    let name = String::from_utf8(read_bytes(p)?)
        .map_err(|_| protocol_error("a method name that is not UTF-8"))?;
    Ok(TMessageIdentifier::new(name, kind, p.read_i32()?))
}

/// A length-prefixed string or binary, its length checked before anything is allocated.
fn read_bytes(p: &mut dyn TInputProtocol) -> thrift::Result<Vec<u8>> {
    let len = p.read_i32()?;
    if !(0..=MAX_STRING).contains(&len) {
        return Err(protocol_error(&format!("a string of {len} bytes")));
    }
    let mut bytes = Vec::new();
    for _ in 0..len {
        bytes.push(p.read_byte()?);
    }
    Ok(bytes)
}

fn read_value(p: &mut dyn TInputProtocol, t: TType, depth: usize) -> thrift::Result<Value> {
    if depth > MAX_DEPTH {
        return Err(protocol_error("the reply nests too deep"));
    }
    Ok(match t {
        TType::Bool => Value::Bool(p.read_bool()?),
        TType::I08 => Value::Byte(p.read_i8()?),
        TType::I16 => Value::I16(p.read_i16()?),
        TType::I32 => Value::I32(p.read_i32()?),
        TType::I64 => Value::I64(p.read_i64()?),
        TType::Double => Value::Double(p.read_double()?),
        TType::String => Value::Bytes(read_bytes(p)?),
        TType::Struct => {
            p.read_struct_begin()?;
            let mut fields = Vec::new();
            loop {
                let f = p.read_field_begin()?;
                if f.field_type == TType::Stop {
                    break;
                }
                let id =
                    f.id.ok_or_else(|| protocol_error("a field without an id"))?;
                fields.push((id, read_value(p, f.field_type, depth + 1)?));
                p.read_field_end()?;
            }
            p.read_struct_end()?;
            Value::Struct(fields)
        }
        TType::List => {
            let l = p.read_list_begin()?;
            let items = read_items(p, l.element_type, l.size, depth)?;
            p.read_list_end()?;
            Value::List(l.element_type, items)
        }
        TType::Set => {
            let s = p.read_set_begin()?;
            let items = read_items(p, s.element_type, s.size, depth)?;
            p.read_set_end()?;
            Value::Set(s.element_type, items)
        }
        TType::Map => read_map(p, depth)?,
        other => return Err(protocol_error(&format!("unexpected type {other}"))),
    })
}

fn read_items(
    p: &mut dyn TInputProtocol,
    t: TType,
    size: i32,
    depth: usize,
) -> thrift::Result<Vec<Value>> {
    let mut items = Vec::new();
    for _ in 0..size.max(0) {
        items.push(read_value(p, t, depth + 1)?);
    }
    Ok(items)
}

fn read_map(p: &mut dyn TInputProtocol, depth: usize) -> thrift::Result<Value> {
    let m = p.read_map_begin()?;
    let (k, v) = match (m.key_type, m.value_type) {
        (Some(k), Some(v)) => (k, v),
        // An empty map carries no types.
        _ => (TType::String, TType::String),
    };
    let mut pairs = Vec::new();
    for _ in 0..m.size.max(0) {
        let key = read_value(p, k, depth + 1)?;
        pairs.push((key, read_value(p, v, depth + 1)?));
    }
    p.read_map_end()?;
    Ok(Value::Map(k, v, pairs))
}

fn write_value(p: &mut dyn TOutputProtocol, v: &Value) -> thrift::Result<()> {
    match v {
        Value::Bool(b) => p.write_bool(*b),
        Value::Byte(b) => p.write_i8(*b),
        Value::I16(i) => p.write_i16(*i),
        Value::I32(i) => p.write_i32(*i),
        Value::I64(i) => p.write_i64(*i),
        Value::Double(d) => p.write_double(*d),
        Value::Bytes(b) => p.write_bytes(b),
        Value::Struct(fields) => {
            p.write_struct_begin(&TStructIdentifier::new("s"))?;
            for (id, f) in fields {
                p.write_field_begin(&TFieldIdentifier::new("f", f.ttype(), *id))?;
                write_value(p, f)?;
                p.write_field_end()?;
            }
            p.write_field_stop()?;
            p.write_struct_end()
        }
        Value::List(t, items) => {
            p.write_list_begin(&TListIdentifier::new(*t, len(items.len())?))?;
            items.iter().try_for_each(|i| write_value(p, i))?;
            p.write_list_end()
        }
        Value::Set(t, items) => {
            p.write_set_begin(&TSetIdentifier::new(*t, len(items.len())?))?;
            items.iter().try_for_each(|i| write_value(p, i))?;
            p.write_set_end()
        }
        Value::Map(k, t, pairs) => {
            let id = TMapIdentifier::new(Some(*k), Some(*t), len(pairs.len())?);
            p.write_map_begin(&id)?;
            for (key, value) in pairs {
                write_value(p, key)?;
                write_value(p, value)?;
            }
            p.write_map_end()
        }
    }
}

fn len(n: usize) -> thrift::Result<i32> {
    i32::try_from(n).map_err(|_| protocol_error("a collection too large for Thrift"))
}

fn protocol_error(message: &str) -> thrift::Error {
    thrift::Error::Protocol(thrift::ProtocolError::new(
        thrift::ProtocolErrorKind::InvalidData,
        message,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value written and read back is the same value, field order and unknown fields kept.
    #[test]
    fn values_round_trip() {
        let mut table = Value::Struct(vec![
            (1, Value::str("trips")),
            (4, Value::I32(7)),
            (9, Value::string_map([("a", "1")])),
            (14, Value::Bool(false)),
            (42, Value::List(TType::I64, vec![Value::I64(-1)])),
            (43, Value::Set(TType::String, vec![])),
            (44, Value::Double(0.5)),
            (
                45,
                Value::Struct(vec![(1, Value::Byte(3)), (2, Value::I16(-2))]),
            ),
        ]);
        let mut buf = Vec::new();
        write_value(&mut TBinaryOutputProtocol::new(&mut buf, true), &table).unwrap();
        let mut read = TBinaryInputProtocol::new(&buf[..], true);
        assert_eq!(read_value(&mut read, TType::Struct, 0).unwrap(), table);

        table.set(1, Value::str("t2"));
        table.set(15, Value::I64(1));
        assert_eq!(table.field(1).and_then(Value::as_str), Some("t2"));
        assert_eq!(table.field(15), Some(&Value::I64(1)));
        let mut params = Value::string_map([("a", "1"), ("b", "2")]);
        params.put("a", "3");
        assert_eq!(params.get("a").and_then(Value::as_str), Some("3"));
        assert_eq!(params.get("b").and_then(Value::as_str), Some("2"));
    }

    /// Truncated or hostile bytes are errors, not panics.
    #[test]
    fn bad_replies_are_errors() {
        let mut nested = vec![];
        for _ in 0..100 {
            nested.extend([12u8, 0, 1]); // field 1: struct
        }
        for bytes in [
            &[12u8, 0][..],
            &[15, 0, 1, 11, 0xff, 0xff, 0xff, 0xff],
            &nested,
            &[11, 0, 1, 0xff, 0xff, 0xff, 0xff], // field 1: a string of -1 bytes
            &[11, 0, 1, 0x7f, 0xff, 0xff, 0xff], // … of 2 GiB
        ] {
            let mut read = TBinaryInputProtocol::new(bytes, true);
            assert!(read_value(&mut read, TType::Struct, 0).is_err());
        }
        // A message header with a hostile name length, or none at all (an HTTP server).
        for bytes in [
            &[0x80u8, 1, 0, 2, 0xff, 0xff, 0xff, 0xfe][..],
            b"HTTP/1.1 400 Bad Request\r\n",
        ] {
            let mut read = TBinaryInputProtocol::new(bytes, true);
            assert!(read_message_begin(&mut read).is_err());
        }
    }
}
