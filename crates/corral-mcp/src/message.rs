//! What one line is: a JSON-RPC request, notification or response, or
//! something malformed that must not reach the other side. Pure.
//!
//! Validation is deliberately shallow and version-independent: it reads the
//! envelope (`id`, `method`, `result`, `error`, and `params.requestId` for
//! cancellations) in one pass without building a tree, and checks what every
//! MCP version agrees on. The line itself is forwarded byte for byte.
//!
//! Malformed:
//! - invalid UTF-8, or not JSON (syntax, trailing data);
//! - not an object (arrays included: JSON-RPC batches are not part of MCP);
//! - an `id` that is not a string or an integer, a `null` id anywhere but in
//!   an error response;
//! - a `method` that is not a string;
//! - a duplicated `id` or `method` key (which one counts would be up to the
//!   reader);
//! - neither `method` nor `id`, or an `id` with neither `method`, `result`
//!   nor `error`.
//!
//! ```
//! use corral_mcp::message::{Id, Malformed, Message, classify};
//!
//! let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#;
//! assert_eq!(
//!     classify(line),
//!     Ok(Message::Request { id: Id::Number(7), method: "tools/call".into() })
//! );
//! assert_eq!(classify(br#"[1, 2]"#), Err(Malformed::NotObject("an array")));
//! ```

use std::fmt;

use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor},
};

/// A JSON-RPC request id as MCP allows it: a string or an integer.
///
/// ```
/// use corral_mcp::message::Id;
///
/// // Shown as it was on the wire (a string quoted), and serialized back so.
/// assert_eq!(Id::Number(7).to_string(), "7");
/// assert_eq!(Id::String("7".into()).to_string(), "\"7\"");
/// assert_eq!(serde_json::to_value(Id::String("a".into()))?, "a");
/// // `7` and `"7"` are two ids.
/// assert_ne!(Id::Number(7), Id::String("7".into()));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    /// An integer id.
    Number(i128),
    /// A string id.
    String(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Number(n) => serializer.serialize_i128(*n),
            Self::String(s) => serializer.serialize_str(s),
        }
    }
}

/// A well-formed message, as far as the relay cares.
///
/// ```
/// use corral_mcp::message::{Id, Message, classify};
///
/// let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#;
/// assert_eq!(
///     classify(cancel),
///     Ok(Message::Notification {
///         method: "notifications/cancelled".into(),
///         cancels: Some(Id::String("a".into())),
///     })
/// );
/// // An error response to a request that could not be read has no id.
/// let error = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#;
/// assert_eq!(classify(error), Ok(Message::Response { id: None }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Expects a response with the same id.
    Request {
        /// Its id.
        id: Id,
        /// Its method.
        method: String,
    },
    /// Expects nothing. `cancels` is the request id of a
    /// `notifications/cancelled`.
    Notification {
        /// Its method.
        method: String,
        /// The request it cancels, for `notifications/cancelled`.
        cancels: Option<Id>,
    },
    /// Answers a request; `id` is `None` for an error response with a `null`
    /// id (the request could not be read).
    Response {
        /// The id of the request it answers.
        id: Option<Id>,
    },
}

/// Why a line was dropped; its text is the note the relay writes.
///
/// ```
/// use corral_mcp::message::{Malformed, classify};
///
/// let error = classify(br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#).unwrap_err();
/// assert_eq!(error, Malformed::BadId("a boolean"));
/// assert_eq!(error.to_string(), "\"id\" is a boolean, not a string or an integer");
/// assert_eq!(classify(b"{\xff}"), Err(Malformed::NotUtf8 { at: 1 }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    /// Longer than the frame cap.
    TooLong {
        /// The line's length.
        len: u64,
        /// The cap.
        max: usize,
    },
    /// Not valid UTF-8.
    NotUtf8 {
        /// Where the first invalid byte is.
        at: usize,
    },
    /// Not one JSON value.
    NotJson(String),
    /// A JSON value other than an object.
    NotObject(&'static str),
    /// An `id` of the wrong type.
    BadId(&'static str),
    /// A `null` id outside an error response.
    NullId,
    /// A `method` that is not a string.
    BadMethod(&'static str),
    /// A key that appears twice.
    Duplicate(&'static str),
    /// Neither request, notification nor response.
    NotAMessage(&'static str),
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong { len, max } => {
                write!(f, "{len} bytes, over the cap of {max} (--max-frame-bytes)")
            }
            Self::NotUtf8 { at } => write!(f, "invalid UTF-8 at byte {at}"),
            Self::NotJson(error) => write!(f, "not JSON ({error})"),
            Self::NotObject(what) => write!(f, "not a JSON object but {what}"),
            Self::BadId(what) => write!(f, "\"id\" is {what}, not a string or an integer"),
            Self::NullId => f.write_str("\"id\" is null outside an error response"),
            Self::BadMethod(what) => write!(f, "\"method\" is {what}, not a string"),
            Self::Duplicate(key) => write!(f, "the key {key:?} appears twice"),
            Self::NotAMessage(why) => write!(f, "not a JSON-RPC message ({why})"),
        }
    }
}

/// Classifies one line.
///
/// # Errors
/// [`Malformed`] saying what is wrong (never [`Malformed::TooLong`], which
/// the framer decides).
pub fn classify(line: &[u8]) -> Result<Message, Malformed> {
    if let Err(error) = std::str::from_utf8(line) {
        return Err(Malformed::NotUtf8 {
            at: error.valid_up_to(),
        });
    }
    let envelope: Envelope =
        serde_json::from_slice(line).map_err(|error| Malformed::NotJson(error.to_string()))?;
    let fields = match envelope {
        Envelope::Object(fields) => fields,
        Envelope::Other(what) => return Err(Malformed::NotObject(what)),
    };
    if let Some(key) = fields.duplicate {
        return Err(Malformed::Duplicate(key));
    }
    match (fields.method, fields.id) {
        (Field::Bad(what), _) => Err(Malformed::BadMethod(what)),
        (Field::Null, _) => Err(Malformed::BadMethod("null")),
        (_, Field::Bad(what)) => Err(Malformed::BadId(what)),
        (Field::Value(method), Field::Value(id)) => Ok(Message::Request { id, method }),
        (Field::Value(method), Field::Absent) => {
            let cancels = (method == "notifications/cancelled")
                .then_some(fields.cancels)
                .flatten();
            Ok(Message::Notification { method, cancels })
        }
        (Field::Value(_), Field::Null) => Err(Malformed::NullId),
        (Field::Absent, Field::Value(id)) if fields.has_result || fields.has_error => {
            Ok(Message::Response { id: Some(id) })
        }
        (Field::Absent, Field::Value(_)) => Err(Malformed::NotAMessage(
            "an \"id\" without \"method\", \"result\" or \"error\"",
        )),
        (Field::Absent, Field::Null) if fields.has_error => Ok(Message::Response { id: None }),
        (Field::Absent, Field::Null) => Err(Malformed::NullId),
        (Field::Absent, Field::Absent) => {
            Err(Malformed::NotAMessage("neither \"method\" nor \"id\""))
        }
    }
}

/// The top-level value of a line.
enum Envelope {
    Object(Fields),
    Other(&'static str),
}

/// One field of interest: absent, `null`, of the right type, or of the wrong
/// type (named).
enum Field<T> {
    Absent,
    Null,
    Value(T),
    Bad(&'static str),
}

struct Fields {
    id: Field<Id>,
    method: Field<String>,
    has_result: bool,
    has_error: bool,
    cancels: Option<Id>,
    duplicate: Option<&'static str>,
}

/// Implements the `visit_*` methods that only name what a value is, for a
/// visitor whose `Value` is `Field<_>` (`named`) or `Envelope` (`other`).
macro_rules! name_the_rest {
    ($wrap:path) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($wrap("a boolean"))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($wrap("a number that is not an integer"))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($wrap("an array"))
        }
    };
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    name_the_rest!(Envelope::Other);

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Envelope, E> {
        Ok(Envelope::Other("a number"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Envelope, E> {
        Ok(Envelope::Other("a number"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Envelope, E> {
        Ok(Envelope::Other("a string"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Envelope, E> {
        Ok(Envelope::Other("null"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut fields = Fields {
            id: Field::Absent,
            method: Field::Absent,
            has_result: false,
            has_error: false,
            cancels: None,
            duplicate: None,
        };
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Id => {
                    if !matches!(fields.id, Field::Absent) {
                        fields.duplicate = Some("id");
                    }
                    fields.id = map.next_value::<IdField>()?.0;
                }
                Key::Method => {
                    if !matches!(fields.method, Field::Absent) {
                        fields.duplicate = Some("method");
                    }
                    fields.method = map.next_value::<MethodField>()?.0;
                }
                Key::Result => {
                    fields.has_result = true;
                    map.next_value::<IgnoredAny>()?;
                }
                Key::Error => {
                    fields.has_error = true;
                    map.next_value::<IgnoredAny>()?;
                }
                Key::Params => fields.cancels = map.next_value::<Params>()?.0,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Envelope::Object(fields))
    }
}

/// The keys the relay reads.
enum Key {
    Id,
    Method,
    Result,
    Error,
    Params,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    "params" => Key::Params,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// The `id` field.
struct IdField(Field<Id>);

impl<'de> Deserialize<'de> for IdField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdVisitor).map(IdField)
    }
}

struct IdVisitor;

impl<'de> Visitor<'de> for IdVisitor {
    type Value = Field<Id>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an id")
    }

    name_the_rest!(Field::Bad);

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        Ok(Field::Value(Id::Number(n.into())))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        Ok(Field::Value(Id::Number(n.into())))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Field::Value(Id::String(s.to_owned())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Null)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Field::Bad("an object"))
    }
}

/// The `method` field.
struct MethodField(Field<String>);

impl<'de> Deserialize<'de> for MethodField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MethodVisitor;
        impl<'de> Visitor<'de> for MethodVisitor {
            type Value = Field<String>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a method")
            }
            name_the_rest!(Field::Bad);
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Field::Bad("a number"))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Field::Bad("a number"))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Field::Value(s.to_owned()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Field::Null)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Field::Bad("an object"))
            }
        }
        deserializer.deserialize_any(MethodVisitor).map(MethodField)
    }
}

/// `params`, read only for its `requestId` (which `notifications/cancelled`
/// carries); any other shape is ignored.
struct Params(Option<Id>);

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ParamsVisitor;
        impl<'de> Visitor<'de> for ParamsVisitor {
            type Value = Params;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("params")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
                let mut request = None;
                while let Some(key) = map.next_key::<RequestIdKey>()? {
                    if key.0 {
                        if let Field::Value(id) = map.next_value::<IdField>()?.0 {
                            request = Some(id);
                        }
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Params(request))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Params, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Params(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Params, E> {
                Ok(Params(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Params, E> {
                Ok(Params(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Params, E> {
                Ok(Params(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Params, E> {
                Ok(Params(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Params, E> {
                Ok(Params(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Params, E> {
                Ok(Params(None))
            }
        }
        deserializer.deserialize_any(ParamsVisitor)
    }
}

/// Whether a key of `params` is `requestId`.
struct RequestIdKey(bool);

impl<'de> Deserialize<'de> for RequestIdKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = RequestIdKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<RequestIdKey, E> {
                Ok(RequestIdKey(key == "requestId"))
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

#[cfg(test)]
mod tests;
