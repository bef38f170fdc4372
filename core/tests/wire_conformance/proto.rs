//! A small parser for the proto3 the Vitess `.proto` files are written in: packages,
//! messages (nested too), fields with `optional` / `repeated`, `map<k, v>`, fields inside
//! `oneof` (they are plain fields on the wire), enums (nested too) and services with their
//! `rpc` lines. Options, comments, `reserved`, `extensions` and `extend` blocks are skipped.
//! Type names are resolved the way protoc resolves them: innermost scope first.

use std::collections::BTreeMap;

/// The proto3 scalar type names.
pub const SCALARS: &[&str] = &[
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
    "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
];

#[derive(Debug, Default)]
pub struct Schema {
    /// Full name (`topodata.Shard.SourceShard`) → message.
    pub messages: BTreeMap<String, Message>,
    pub enums: BTreeMap<String, Enum>,
    pub services: BTreeMap<String, Service>,
    /// rpc lines not yet resolved: a method may name a message of a file added later.
    pending: Vec<PendingMethod>,
}

#[derive(Debug)]
pub struct Message {
    pub file: String,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub number: u32,
    pub label: Label,
    pub ty: Type,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// No label (proto3 implicit presence; for messages: always has presence).
    Singular,
    /// `optional` (proto3 explicit presence).
    Optional,
    Repeated,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    Scalar(String),
    /// A message or enum, as written, with the scope it was written in (for resolution).
    Named {
        name: String,
        scope: String,
    },
    Map {
        key: String,
        value: Box<Type>,
    },
}

#[derive(Debug)]
pub struct Enum {
    pub file: String,
    /// Name → number (aliases included).
    pub values: BTreeMap<String, i64>,
}

#[derive(Debug)]
pub struct Service {
    pub file: String,
    pub methods: BTreeMap<String, Method>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Method {
    /// Resolved full names.
    pub input: String,
    pub output: String,
    pub client_streaming: bool,
    pub server_streaming: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    Message(String),
    Enum(String),
}

impl Resolved {
    pub fn describe(&self) -> String {
        match self {
            Self::Message(n) => format!("message {n}"),
            Self::Enum(n) => format!("enum {n}"),
        }
    }
}

impl Type {
    /// The type as the .proto file spells it.
    pub fn describe(&self) -> String {
        match self {
            Self::Scalar(s) => s.clone(),
            Self::Named { name, .. } => name.clone(),
            Self::Map { key, value } => format!("map<{key}, {}>", value.describe()),
        }
    }
}

impl Field {
    /// The field's declaration as the .proto file has it (`repeated Row rows = 4`).
    pub fn describe(&self) -> String {
        let label = match self.label {
            Label::Singular => "",
            Label::Optional => "optional ",
            Label::Repeated => "repeated ",
        };
        format!(
            "`{label}{} {} = {}`",
            self.ty.describe(),
            self.name,
            self.number
        )
    }
}

impl Schema {
    /// Parses one file into the schema. Errors name the file and line.
    pub fn add_file(&mut self, file: &str, text: &str) -> Result<(), String> {
        let toks = lex(text).map_err(|(line, e)| format!("{file}:{line}: {e}"))?;
        let mut p = Parser {
            toks,
            at: 0,
            file: file.to_owned(),
            package: String::new(),
            schema: self,
        };
        p.file_body()
            .map_err(|e| format!("{file}:{}: {e}", p.line()))
    }

    /// Once every file is in: resolves the rpc lines, and checks that every field's
    /// message or enum type resolves (a parser that lost a definition fails here).
    pub fn finish(&mut self) -> Result<(), String> {
        let mut errors = Vec::new();
        for (full, m) in &self.messages {
            for f in &m.fields {
                if matches!(f.ty, Type::Scalar(_)) {
                    continue;
                }
                if let Type::Map { value, .. } = &f.ty
                    && matches!(**value, Type::Scalar(_))
                {
                    continue;
                }
                if self.resolve_type(&f.ty).is_none() {
                    errors.push(format!(
                        "{}: {full}.{}: type `{}` does not resolve",
                        m.file,
                        f.name,
                        f.ty.describe()
                    ));
                }
            }
        }
        for p in std::mem::take(&mut self.pending) {
            let resolve = |t: &str| match self.resolve(&p.scope, t) {
                Some(Resolved::Message(m)) => Ok(m),
                other => Err(format!(
                    "rpc {}.{}: `{t}` is not a message ({other:?})",
                    p.service, p.method
                )),
            };
            match (resolve(&p.input), resolve(&p.output)) {
                (Ok(input), Ok(output)) => {
                    if let Some(s) = self.services.get_mut(&p.service) {
                        s.methods.insert(
                            p.method,
                            Method {
                                input,
                                output,
                                client_streaming: p.client_streaming,
                                server_streaming: p.server_streaming,
                            },
                        );
                    }
                }
                (a, b) => errors.extend([a.err(), b.err()].into_iter().flatten()),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }

    /// Resolves a type name written in `scope` (a package or a message's full name):
    /// `.a.B` is absolute; otherwise the innermost enclosing scope that defines it wins.
    /// Needs the file that defines the type to have been added (all files are, before
    /// anything is checked).
    pub fn resolve(&self, scope: &str, name: &str) -> Option<Resolved> {
        let lookup = |full: &str| {
            if self.messages.contains_key(full) {
                Some(Resolved::Message(full.to_owned()))
            } else if self.enums.contains_key(full) {
                Some(Resolved::Enum(full.to_owned()))
            } else {
                None
            }
        };
        if let Some(abs) = name.strip_prefix('.') {
            return lookup(abs);
        }
        let mut scope = scope.to_owned();
        loop {
            let candidate = if scope.is_empty() {
                name.to_owned()
            } else {
                format!("{scope}.{name}")
            };
            if let Some(r) = lookup(&candidate) {
                return Some(r);
            }
            if scope.is_empty() {
                return None;
            }
            scope = match scope.rfind('.') {
                Some(i) => scope[..i].to_owned(),
                None => String::new(),
            };
        }
    }

    /// Resolves a field's named type (messages and enums; maps: their value type).
    pub fn resolve_type(&self, ty: &Type) -> Option<Resolved> {
        match ty {
            Type::Named { name, scope } => self.resolve(scope, name),
            Type::Map { value, .. } => self.resolve_type(value),
            Type::Scalar(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num(String),
    Str(String),
    Sym(char),
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, (usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = line;
            i += 2;
            loop {
                match chars.get(i) {
                    None => return Err((start, "unterminated /* comment".into())),
                    Some('*') if chars.get(i + 1) == Some(&'/') => {
                        i += 2;
                        break;
                    }
                    Some('\n') => line += 1,
                    Some(_) => {}
                }
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let s = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(chars[s..i].iter().collect()), line));
        } else if c.is_ascii_digit() {
            let s = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            out.push((Tok::Num(chars[s..i].iter().collect()), line));
        } else if c == '"' || c == '\'' {
            let s = line;
            i += 1;
            let mut v = String::new();
            loop {
                match chars.get(i) {
                    None | Some('\n') => return Err((s, "unterminated string".into())),
                    Some('\\') => {
                        if let Some(e) = chars.get(i + 1) {
                            v.push(*e);
                        }
                        i += 2;
                    }
                    Some(q) if *q == c => {
                        i += 1;
                        break;
                    }
                    Some(x) => {
                        v.push(*x);
                        i += 1;
                    }
                }
            }
            out.push((Tok::Str(v), line));
        } else {
            out.push((Tok::Sym(c), line));
            i += 1;
        }
    }
    Ok(out)
}

#[derive(Debug)]
struct PendingMethod {
    service: String,
    method: String,
    input: String,
    output: String,
    client_streaming: bool,
    server_streaming: bool,
    scope: String,
}

struct Parser<'s> {
    toks: Vec<(Tok, usize)>,
    at: usize,
    file: String,
    package: String,
    schema: &'s mut Schema,
}

impl Parser<'_> {
    fn line(&self) -> usize {
        self.toks
            .get(self.at.min(self.toks.len().saturating_sub(1)))
            .map_or(0, |t| t.1)
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.0)
    }

    fn peek_at(&self, ahead: usize) -> Option<&Tok> {
        self.toks.get(self.at + ahead).map(|t| &t.0)
    }

    fn next(&mut self) -> Result<Tok, String> {
        let t = self
            .toks
            .get(self.at)
            .map(|t| t.0.clone())
            .ok_or("unexpected end of file")?;
        self.at += 1;
        Ok(t)
    }

    fn is_sym(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Sym(c))
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(x)) if x == s)
    }

    // These look before they take: on an error the offending token is still current,
    // so the error's line is its line.
    fn expect_sym(&mut self, c: char) -> Result<(), String> {
        if self.is_sym(c) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected `{c}`, found {:?}", self.peek()))
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.peek().cloned() {
            Some(Tok::Ident(s)) => {
                self.at += 1;
                Ok(s)
            }
            other => Err(format!("expected a name, found {other:?}")),
        }
    }

    /// `a.b.C` or `.a.b.C`.
    fn full_ident(&mut self) -> Result<String, String> {
        let mut s = String::new();
        if self.is_sym('.') {
            self.at += 1;
            s.push('.');
        }
        s.push_str(&self.ident()?);
        while self.is_sym('.') {
            self.at += 1;
            s.push('.');
            s.push_str(&self.ident()?);
        }
        Ok(s)
    }

    fn number(&mut self) -> Result<i64, String> {
        let neg = self.is_sym('-');
        if neg {
            self.at += 1;
        }
        let n = match self.peek().cloned() {
            Some(Tok::Num(s)) => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(h) => i64::from_str_radix(h, 16),
                None => s.parse(),
            }
            .map_err(|e| format!("bad number {s:?}: {e}"))?,
            other => return Err(format!("expected a number, found {other:?}")),
        };
        self.at += 1;
        Ok(if neg { -n } else { n })
    }

    /// Skips to the end of a statement: its `;` at nesting depth 0, or a `{ … }` block
    /// ending it (an aggregate option value is nested inside, so it is skipped whole).
    fn skip_statement(&mut self) -> Result<(), String> {
        let mut depth = 0usize;
        loop {
            match self.next()? {
                Tok::Sym('{' | '[' | '(' | '<') => depth += 1,
                Tok::Sym('}' | ']' | ')' | '>') => depth = depth.saturating_sub(1),
                Tok::Sym(';') if depth == 0 => return Ok(()),
                _ => {}
            }
        }
    }

    /// Skips a `name … { … }` block (e.g. `extend`).
    fn skip_block(&mut self) -> Result<(), String> {
        while !self.is_sym('{') {
            self.next()?;
        }
        self.skip_braces()
    }

    /// Skips a balanced `{ … }` starting at the current `{`.
    fn skip_braces(&mut self) -> Result<(), String> {
        self.expect_sym('{')?;
        let mut depth = 1usize;
        while depth > 0 {
            match self.next()? {
                Tok::Sym('{') => depth += 1,
                Tok::Sym('}') => depth -= 1,
                _ => {}
            }
        }
        Ok(())
    }

    /// Skips `[ … ]` field or enum-value options, if present.
    fn skip_bracket_options(&mut self) -> Result<(), String> {
        if !self.is_sym('[') {
            return Ok(());
        }
        let mut depth = 0usize;
        loop {
            match self.next()? {
                Tok::Sym('[') => depth += 1,
                Tok::Sym(']') => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
    }

    fn file_body(&mut self) -> Result<(), String> {
        while let Some(t) = self.peek().cloned() {
            match t {
                Tok::Sym(';') => self.at += 1,
                Tok::Ident(k) => match k.as_str() {
                    "syntax" | "edition" | "import" | "option" => self.skip_statement()?,
                    "package" => {
                        self.at += 1;
                        self.package = self.full_ident()?;
                        self.expect_sym(';')?;
                    }
                    "message" => {
                        self.at += 1;
                        let scope = self.package.clone();
                        self.message(&scope)?;
                    }
                    "enum" => {
                        self.at += 1;
                        let scope = self.package.clone();
                        self.enumeration(&scope)?;
                    }
                    "service" => {
                        self.at += 1;
                        self.service()?;
                    }
                    "extend" => self.skip_block()?,
                    other => return Err(format!("unexpected `{other}` at top level")),
                },
                other => return Err(format!("unexpected {other:?} at top level")),
            }
        }
        Ok(())
    }

    fn qualify(scope: &str, name: &str) -> String {
        if scope.is_empty() {
            name.to_owned()
        } else {
            format!("{scope}.{name}")
        }
    }

    fn message(&mut self, scope: &str) -> Result<(), String> {
        let name = self.ident()?;
        let full = Self::qualify(scope, &name);
        self.expect_sym('{')?;
        let mut fields = Vec::new();
        loop {
            match self.peek().cloned() {
                None => return Err(format!("message {full} is not closed")),
                Some(Tok::Sym('}')) => {
                    self.at += 1;
                    break;
                }
                Some(Tok::Sym(';')) => self.at += 1,
                // A field of an absolute type (`.pkg.Type name = N;`).
                Some(Tok::Sym('.')) => fields.push(self.field(&full)?),
                Some(Tok::Ident(k)) => match k.as_str() {
                    "message" if matches!(self.peek_at(2), Some(Tok::Sym('{'))) => {
                        self.at += 1;
                        self.message(&full)?;
                    }
                    "enum" if matches!(self.peek_at(2), Some(Tok::Sym('{'))) => {
                        self.at += 1;
                        self.enumeration(&full)?;
                    }
                    "oneof" if matches!(self.peek_at(2), Some(Tok::Sym('{'))) => {
                        self.at += 1;
                        self.ident()?;
                        self.expect_sym('{')?;
                        while !self.is_sym('}') {
                            if self.is_ident("option") {
                                self.skip_statement()?;
                            } else if self.is_sym(';') {
                                self.at += 1;
                            } else {
                                fields.push(self.field(&full)?);
                            }
                        }
                        self.at += 1;
                    }
                    "reserved" | "extensions" | "option" => self.skip_statement()?,
                    "extend" => self.skip_block()?,
                    _ => fields.push(self.field(&full)?),
                },
                Some(other) => return Err(format!("unexpected {other:?} in message {full}")),
            }
        }
        let dup = self.schema.messages.insert(
            full.clone(),
            Message {
                file: self.file.clone(),
                fields,
            },
        );
        if dup.is_some() {
            return Err(format!("message {full} is defined twice"));
        }
        Ok(())
    }

    /// `[optional|repeated|required] Type name = N [options];` or `map<K, V> name = N;`.
    fn field(&mut self, scope: &str) -> Result<Field, String> {
        let mut label = Label::Singular;
        if self.is_ident("map") && matches!(self.peek_at(1), Some(Tok::Sym('<'))) {
            self.at += 2;
            let key = self.ident()?;
            self.expect_sym(',')?;
            let value = self.type_name(scope)?;
            self.expect_sym('>')?;
            let ty = Type::Map {
                key,
                value: Box::new(value),
            };
            return self.field_rest(label, ty);
        }
        if self.is_ident("optional") || self.is_ident("required") {
            label = Label::Optional;
            self.at += 1;
        } else if self.is_ident("repeated") {
            label = Label::Repeated;
            self.at += 1;
        }
        let ty = self.type_name(scope)?;
        self.field_rest(label, ty)
    }

    fn type_name(&mut self, scope: &str) -> Result<Type, String> {
        let name = self.full_ident()?;
        Ok(if SCALARS.contains(&name.as_str()) {
            Type::Scalar(name)
        } else {
            Type::Named {
                name,
                scope: scope.to_owned(),
            }
        })
    }

    fn field_rest(&mut self, label: Label, ty: Type) -> Result<Field, String> {
        let name = self.ident()?;
        self.expect_sym('=')?;
        let n = self.number()?;
        let number = u32::try_from(n).map_err(|_| format!("field {name}: bad number {n}"))?;
        self.skip_bracket_options()?;
        self.expect_sym(';')?;
        Ok(Field {
            name,
            number,
            label,
            ty,
        })
    }

    fn enumeration(&mut self, scope: &str) -> Result<(), String> {
        let name = self.ident()?;
        let full = Self::qualify(scope, &name);
        self.expect_sym('{')?;
        let mut values = BTreeMap::new();
        loop {
            if self.is_sym('}') {
                self.at += 1;
                break;
            }
            if self.is_sym(';') {
                self.at += 1;
            } else if self.is_ident("option") || self.is_ident("reserved") {
                self.skip_statement()?;
            } else {
                let v = self.ident()?;
                self.expect_sym('=')?;
                let n = self.number()?;
                self.skip_bracket_options()?;
                self.expect_sym(';')?;
                values.insert(v, n);
            }
        }
        let e = Enum {
            file: self.file.clone(),
            values,
        };
        if self.schema.enums.insert(full.clone(), e).is_some() {
            return Err(format!("enum {full} is defined twice"));
        }
        Ok(())
    }

    fn service(&mut self) -> Result<(), String> {
        let name = self.ident()?;
        let full = Self::qualify(&self.package, &name);
        self.expect_sym('{')?;
        loop {
            if self.is_sym('}') {
                self.at += 1;
                break;
            }
            if self.is_sym(';') {
                self.at += 1;
            } else if self.is_ident("option") {
                self.skip_statement()?;
            } else if self.is_ident("rpc") {
                self.at += 1;
                let method = self.ident()?;
                let (cs, input) = self.rpc_type()?;
                if !self.is_ident("returns") {
                    return Err(format!("rpc {method}: expected `returns`"));
                }
                self.at += 1;
                let (ss, output) = self.rpc_type()?;
                if self.is_sym('{') {
                    self.skip_braces()?;
                } else {
                    self.expect_sym(';')?;
                }
                self.schema.pending.push(PendingMethod {
                    service: full.clone(),
                    method,
                    input,
                    output,
                    client_streaming: cs,
                    server_streaming: ss,
                    scope: self.package.clone(),
                });
            } else {
                return Err(format!("unexpected {:?} in service {full}", self.peek()));
            }
        }
        self.schema.services.insert(
            full,
            Service {
                file: self.file.clone(),
                methods: BTreeMap::new(),
            },
        );
        Ok(())
    }

    /// `( [stream] Type )`.
    fn rpc_type(&mut self) -> Result<(bool, String), String> {
        self.expect_sym('(')?;
        let streaming =
            self.is_ident("stream") && !matches!(self.peek_at(1), Some(Tok::Sym(')' | '.')));
        if streaming {
            self.at += 1;
        }
        let t = self.full_ident()?;
        self.expect_sym(')')?;
        Ok((streaming, t))
    }
}
