//! A purpose-built scanner for the Rust side: the `#[derive(prost::Message)]` structs with
//! their `#[prost(…)]` attributes, the `#[derive(prost::Enumeration)]` enums, `const`s of
//! `&str` / `i32`, and the gRPC call sites (which method name a client or fake server pairs
//! with which request and response type). It tokenizes (comments, strings, char literals and
//! lifetimes are handled) and walks items; it does not type-check anything.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    Lifetime(String),
    Str(String),
    Num(String),
    Char,
    Punct(char),
}

/// One scanned source file.
#[derive(Debug, Clone)]
pub struct RustFile {
    /// As shown in failure messages (`core/src/vtctld/messages.rs`).
    pub path: String,
    pub toks: Vec<(Tok, usize)>,
    pub messages: Vec<RustMessage>,
    pub enums: Vec<RustEnum>,
    /// `const NAME: &str = "…"` and `const NAME: i32 = N` (by name; the last one wins).
    pub str_consts: BTreeMap<String, String>,
    pub int_consts: BTreeMap<String, i64>,
}

#[derive(Debug, Clone)]
pub struct RustMessage {
    /// The Rust module the struct is in (`topodata`); for a file without inner modules,
    /// the root name the caller gave.
    pub module: String,
    pub name: String,
    pub line: usize,
    pub fields: Vec<RustField>,
}

#[derive(Debug, Clone)]
pub struct RustField {
    pub name: String,
    /// The line of its `#[prost(…)]` attribute.
    pub line: usize,
    pub tag: u32,
    pub kind: Kind,
    /// `optional` / `repeated` from the attribute.
    pub label: Option<String>,
    /// The attribute as written (for messages).
    pub attr: String,
    /// The Rust type as written (`Option<topodata::Shard>`), tokens joined.
    pub rust_type: String,
    /// The path of the innermost type argument (`topodata::Shard`; for maps the value).
    pub inner_type: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Scalar(String),
    Message,
    /// The enum path inside `enumeration = "…"`, split at `::`.
    Enumeration(Vec<String>),
    /// `map = "K, V"`: key type and value kind (`int32`, `message`, `enumeration(X)`).
    Map(String, String),
}

#[derive(Debug, Clone)]
pub struct RustEnum {
    pub module: String,
    pub name: String,
    pub line: usize,
    /// (name, value, line)
    pub variants: Vec<(String, i64, usize)>,
}

/// One gRPC method as a client or a fake server uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    pub path: String,
    pub line: usize,
    /// Where it is (`fn get_shard`, `match arm "GetShard"`).
    pub context: String,
    pub method: String,
    pub request: String,
    pub response: String,
}

const PROST_SCALARS: &[&str] = &[
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
    "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
];

pub fn lex(text: &str) -> Result<Vec<(Tok, usize)>, String> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    return Err(format!("line {line}: unterminated /* comment"));
                }
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if (ch == 'r' || ch == 'b') && raw_string_start(&c, i).is_some() {
            // r"…", r#"…"#, br"…"
            let (hashes, body) = raw_string_start(&c, i).unwrap_or((0, i));
            let mut j = body;
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while j < c.len() && !c[j..].starts_with(&close) {
                if c[j] == '\n' {
                    line += 1;
                }
                j += 1;
            }
            out.push((Tok::Str(c[body..j.min(c.len())].iter().collect()), line));
            i = j + close.len();
        } else if ch == 'r' && next == Some('#') && c.get(i + 2).is_some_and(|x| ident_char(*x)) {
            // r#type
            let s = i + 2;
            i = s;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push((Tok::Ident(c[s..i].iter().collect()), line));
        } else if ch == 'b' && (next == Some('"') || next == Some('\'')) {
            // b"…" / b'…': the same as without the prefix.
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let s = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push((Tok::Ident(c[s..i].iter().collect()), line));
        } else if ch.is_ascii_digit() {
            let s = i;
            while i < c.len()
                && (ident_char(c[i])
                    || (c[i] == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            out.push((Tok::Num(c[s..i].iter().collect()), line));
        } else if ch == '"' {
            let s = line;
            i += 1;
            let mut v = String::new();
            loop {
                match c.get(i) {
                    None => return Err(format!("line {s}: unterminated string")),
                    Some('\\') => {
                        match c.get(i + 1) {
                            Some('n') => v.push('\n'),
                            Some('t') => v.push('\t'),
                            Some('\n') => {
                                line += 1;
                                // A line continuation: the next line's indent is dropped.
                                i += 2;
                                while i < c.len() && c[i].is_whitespace() {
                                    if c[i] == '\n' {
                                        line += 1;
                                    }
                                    i += 1;
                                }
                                continue;
                            }
                            Some(x) => v.push(*x),
                            None => {}
                        }
                        i += 2;
                    }
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some(x) => {
                        if *x == '\n' {
                            line += 1;
                        }
                        v.push(*x);
                        i += 1;
                    }
                }
            }
            out.push((Tok::Str(v), line));
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\'', '\u{1F600}') or a lifetime ('static).
            if next == Some('\\') {
                let mut j = i + 2;
                j += 1;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                out.push((Tok::Char, line));
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                out.push((Tok::Char, line));
                i += 3;
            } else {
                let s = i + 1;
                i = s;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
                out.push((Tok::Lifetime(c[s..i].iter().collect()), line));
            }
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    Ok(out)
}

/// At `r"`, `r#…#"`, `br"`, `br#"`: the number of `#` and where the body starts.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (c.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

fn is_ident(t: Option<&Tok>, s: &str) -> bool {
    matches!(t, Some(Tok::Ident(x)) if x == s)
}

fn is_punct(t: Option<&Tok>, ch: char) -> bool {
    t == Some(&Tok::Punct(ch))
}

/// Index just past the bracket that closes the one at `open`.
fn matching(toks: &[(Tok, usize)], open: usize) -> Result<usize, String> {
    let (o, cl) = match toks.get(open).map(|t| &t.0) {
        Some(Tok::Punct('(')) => ('(', ')'),
        Some(Tok::Punct('[')) => ('[', ']'),
        Some(Tok::Punct('{')) => ('{', '}'),
        other => return Err(format!("expected a bracket, found {other:?}")),
    };
    let mut depth = 0usize;
    for (j, (t, _)) in toks.iter().enumerate().skip(open) {
        if *t == Tok::Punct(o) {
            depth += 1;
        } else if *t == Tok::Punct(cl) {
            depth -= 1;
            if depth == 0 {
                return Ok(j + 1);
            }
        }
    }
    Err(format!("unbalanced `{o}` at line {}", toks[open].1))
}

fn joined(toks: &[(Tok, usize)]) -> String {
    let mut s = String::new();
    for (t, _) in toks {
        match t {
            Tok::Ident(x) | Tok::Num(x) => {
                if s.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    s.push(' ');
                }
                s.push_str(x);
            }
            Tok::Lifetime(x) => {
                s.push('\'');
                s.push_str(x);
            }
            Tok::Str(x) => s.push_str(&format!("{x:?}")),
            Tok::Char => s.push_str("'?'"),
            Tok::Punct(',') => s.push_str(", "),
            Tok::Punct('=') => s.push_str(" = "),
            Tok::Punct(c) => s.push(*c),
        }
    }
    s
}

/// Whether an attribute's tokens (inside `#[…]`) are a derive naming `prost::<what>`.
fn derives_prost(attr: &[(Tok, usize)], what: &str) -> bool {
    is_ident(attr.first().map(|t| &t.0), "derive")
        && attr.windows(4).any(|w| {
            is_ident(Some(&w[0].0), "prost")
                && is_punct(Some(&w[1].0), ':')
                && is_punct(Some(&w[2].0), ':')
                && is_ident(Some(&w[3].0), what)
        })
}

impl RustFile {
    /// Scans `text`; `root` names the module of items outside any inline `mod`.
    pub fn scan(path: &str, root: &str, text: &str) -> Result<Self, String> {
        let toks = lex(text).map_err(|e| format!("{path}: {e}"))?;
        let mut f = Self {
            path: path.to_owned(),
            toks,
            messages: Vec::new(),
            enums: Vec::new(),
            str_consts: BTreeMap::new(),
            int_consts: BTreeMap::new(),
        };
        f.items(root).map_err(|e| format!("{path}: {e}"))?;
        Ok(f)
    }

    /// For a guard against a scanner that silently skips: how many `#[derive(…)]`s name
    /// `Message` or `Enumeration` (with or without a path), and how many `#[prost(…)]`
    /// attributes there are, counted on the bare tokens (comments and strings excluded).
    pub fn prost_counts(&self) -> (usize, usize) {
        let mut derives = 0;
        let mut attrs = 0;
        for i in 0..self.toks.len() {
            if !(is_punct(self.tok(i), '#') && is_punct(self.tok(i + 1), '[')) {
                continue;
            }
            if is_ident(self.tok(i + 2), "prost") {
                attrs += 1;
            }
            if is_ident(self.tok(i + 2), "derive") {
                let end = matching(&self.toks, i + 1).unwrap_or(i + 1);
                derives += self.toks[i..end]
                    .iter()
                    .filter(
                        |(t, _)| matches!(t, Tok::Ident(x) if x == "Message" || x == "Enumeration"),
                    )
                    .count();
            }
        }
        (derives, attrs)
    }

    fn tok(&self, i: usize) -> Option<&Tok> {
        self.toks.get(i).map(|t| &t.0)
    }

    fn line(&self, i: usize) -> usize {
        self.toks.get(i).map_or(0, |t| t.1)
    }

    fn items(&mut self, root: &str) -> Result<(), String> {
        // (module name, brace depth inside it)
        let mut mods: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut attrs: Vec<Vec<(Tok, usize)>> = Vec::new();
        let mut i = 0;
        while i < self.toks.len() {
            let module = mods.last().map_or(root.to_owned(), |m| m.0.clone());
            let t = self.toks[i].0.clone();
            match t {
                Tok::Punct('#') => {
                    let open = if is_punct(self.tok(i + 1), '!') {
                        i + 2
                    } else {
                        i + 1
                    };
                    let end = matching(&self.toks, open)?;
                    attrs.push(self.toks[open + 1..end - 1].to_vec());
                    i = end;
                    continue;
                }
                Tok::Ident(ref k) if k == "pub" => {
                    i += 1;
                    if is_punct(self.tok(i), '(') {
                        i = matching(&self.toks, i)?;
                    }
                    continue;
                }
                _ => {}
            }
            let message = attrs.iter().any(|a| derives_prost(a, "Message"));
            let enumeration = attrs.iter().any(|a| derives_prost(a, "Enumeration"));
            if message && !is_ident(self.tok(i), "struct") {
                return Err(format!(
                    "line {}: derive(prost::Message) is not followed by a struct",
                    self.line(i)
                ));
            }
            if enumeration && !is_ident(self.tok(i), "enum") {
                return Err(format!(
                    "line {}: derive(prost::Enumeration) is not followed by an enum",
                    self.line(i)
                ));
            }
            attrs.clear();
            if message {
                i = self.parse_struct(i, &module)?;
                continue;
            }
            if enumeration {
                i = self.parse_enum(i, &module)?;
                continue;
            }
            match &t {
                Tok::Ident(k)
                    if k == "mod"
                        && matches!(self.tok(i + 1), Some(Tok::Ident(_)))
                        && is_punct(self.tok(i + 2), '{') =>
                {
                    if let Some(Tok::Ident(name)) = self.tok(i + 1) {
                        depth += 1;
                        mods.push((name.clone(), depth));
                    }
                    i += 3;
                    continue;
                }
                Tok::Ident(k) if k == "const" => self.parse_const(i),
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    if mods.last().is_some_and(|m| m.1 == depth) {
                        mods.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// `const NAME: &str = "…";` / `const NAME: &'static str = "…";` / `const NAME: i32 = N;`
    fn parse_const(&mut self, i: usize) {
        let Some(Tok::Ident(name)) = self.tok(i + 1).cloned() else {
            return;
        };
        if !is_punct(self.tok(i + 2), ':') {
            return;
        }
        let mut j = i + 3;
        let mut ty = Vec::new();
        while j < self.toks.len() && !is_punct(self.tok(j), '=') && !is_punct(self.tok(j), ';') {
            ty.push(self.toks[j].clone());
            j += 1;
        }
        if !is_punct(self.tok(j), '=') {
            return;
        }
        let neg = is_punct(self.tok(j + 1), '-');
        let value = self.tok(j + 1 + usize::from(neg)).cloned();
        let ty = joined(&ty);
        match value {
            Some(Tok::Str(s)) if ty == "&str" || ty == "&'static str" => {
                self.str_consts.insert(name, s);
            }
            Some(Tok::Num(n)) if ty == "i32" => {
                if let Ok(v) = n.parse::<i64>() {
                    self.int_consts.insert(name, if neg { -v } else { v });
                }
            }
            _ => {}
        }
    }

    /// At `struct`: parses `struct Name { fields }` and returns the index past it.
    fn parse_struct(&mut self, i: usize, module: &str) -> Result<usize, String> {
        let line = self.line(i);
        let Some(Tok::Ident(name)) = self.tok(i + 1).cloned() else {
            return Err(format!("line {line}: struct without a name"));
        };
        if !is_punct(self.tok(i + 2), '{') {
            return Err(format!(
                "line {line}: prost::Message struct {name} is not a struct with named fields"
            ));
        }
        let end = matching(&self.toks, i + 2)?;
        let mut fields = Vec::new();
        let mut j = i + 3;
        let close = end - 1;
        while j < close {
            let mut prost_attr = None;
            let mut attr_line = self.line(j);
            while is_punct(self.tok(j), '#') {
                let e = matching(&self.toks, j + 1)?;
                let inner = &self.toks[j + 2..e - 1];
                if is_ident(inner.first().map(|t| &t.0), "prost") {
                    prost_attr = Some(inner[1..].to_vec());
                    attr_line = self.line(j);
                }
                j = e;
            }
            if is_ident(self.tok(j), "pub") {
                j += 1;
                if is_punct(self.tok(j), '(') {
                    j = matching(&self.toks, j)?;
                }
            }
            let fline = self.line(j);
            let Some(Tok::Ident(fname)) = self.tok(j).cloned() else {
                return Err(format!("line {fline}: {name}: expected a field name"));
            };
            if !is_punct(self.tok(j + 1), ':') {
                return Err(format!("line {fline}: {name}.{fname}: expected `:`"));
            }
            j += 2;
            let ty_start = j;
            let mut angle = 0i32;
            while j < close {
                match self.tok(j) {
                    Some(Tok::Punct('<')) => angle += 1,
                    Some(Tok::Punct('>')) => angle -= 1,
                    Some(Tok::Punct(',')) if angle == 0 => break,
                    _ => {}
                }
                j += 1;
            }
            let ty_toks = self.toks[ty_start..j].to_vec();
            j += 1; // the comma (or the closing brace)
            let Some(attr) = prost_attr else {
                return Err(format!(
                    "line {fline}: {name}.{fname} has no #[prost(…)] attribute"
                ));
            };
            fields.push(field_from_attr(&name, &fname, attr_line, &attr, &ty_toks)?);
        }
        self.messages.push(RustMessage {
            module: module.to_owned(),
            name,
            line,
            fields,
        });
        Ok(end)
    }

    /// At `enum`: parses `enum Name { Variant = N, … }`.
    fn parse_enum(&mut self, i: usize, module: &str) -> Result<usize, String> {
        let line = self.line(i);
        let Some(Tok::Ident(name)) = self.tok(i + 1).cloned() else {
            return Err(format!("line {line}: enum without a name"));
        };
        if !is_punct(self.tok(i + 2), '{') {
            return Err(format!("line {line}: enum {name}: expected `{{`"));
        }
        let end = matching(&self.toks, i + 2)?;
        let mut variants = Vec::new();
        let mut j = i + 3;
        while j < end - 1 {
            while is_punct(self.tok(j), '#') {
                j = matching(&self.toks, j + 1)?;
            }
            let vline = self.line(j);
            let (Some(Tok::Ident(v)), true) =
                (self.tok(j).cloned(), is_punct(self.tok(j + 1), '='))
            else {
                return Err(format!(
                    "line {vline}: enum {name}: every variant needs an explicit `= N`"
                ));
            };
            let neg = is_punct(self.tok(j + 2), '-');
            let k = j + 2 + usize::from(neg);
            let Some(Tok::Num(n)) = self.tok(k) else {
                return Err(format!("line {vline}: enum {name}::{v}: expected a number"));
            };
            let n: i64 = n
                .parse()
                .map_err(|e| format!("line {vline}: enum {name}::{v}: {e}"))?;
            variants.push((v, if neg { -n } else { n }, vline));
            j = k + 1;
            if is_punct(self.tok(j), ',') {
                j += 1;
            }
        }
        self.enums.push(RustEnum {
            module: module.to_owned(),
            name,
            line,
            variants,
        });
        Ok(end)
    }

    /// Every `fn`: (name, line, signature tokens `(…) -> …`, body range).
    fn functions(
        &self,
    ) -> Vec<(
        String,
        usize,
        std::ops::Range<usize>,
        std::ops::Range<usize>,
    )> {
        let mut out = Vec::new();
        for i in 0..self.toks.len() {
            if !is_ident(self.tok(i), "fn") {
                continue;
            }
            let Some(Tok::Ident(name)) = self.tok(i + 1) else {
                continue;
            };
            let mut j = i + 2;
            let mut paren = 0i32;
            while j < self.toks.len() {
                match self.tok(j) {
                    Some(Tok::Punct('(')) => paren += 1,
                    Some(Tok::Punct(')')) => paren -= 1,
                    Some(Tok::Punct('{' | ';')) if paren == 0 => break,
                    _ => {}
                }
                j += 1;
            }
            let body = if is_punct(self.tok(j), '{') {
                matching(&self.toks, j).map_or(j..j, |e| j + 1..e - 1)
            } else {
                j..j
            };
            out.push((name.clone(), self.line(i), i + 2..j, body));
        }
        out
    }

    /// Resolves a `{CONST}` or literal service name.
    fn service_name(&self, raw: &str, consts: &BTreeMap<String, String>) -> Result<String, String> {
        match raw.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            Some(c) => consts
                .get(c)
                .cloned()
                .ok_or_else(|| format!("{}: no `const {c}: &str` found", self.path)),
            None => Ok(raw.to_owned()),
        }
    }

    /// The client's call sites: each fn that passes a method-name literal to a call helper
    /// (a fn with a `method: &'static str` parameter), with the request and response
    /// message types named in that fn. The service comes from the path template
    /// `"/<service>/{method}"` in the file.
    pub fn client_calls(
        &self,
        known: &BTreeSet<String>,
        consts: &BTreeMap<String, String>,
    ) -> Result<Vec<CallSite>, String> {
        let mut templates = BTreeSet::new();
        for (t, _) in &self.toks {
            if let Tok::Str(s) = t
                && let Some(svc) = s
                    .strip_prefix('/')
                    .and_then(|r| r.strip_suffix("/{method}"))
            {
                templates.insert(svc.to_owned());
            }
        }
        let [template] = templates.iter().collect::<Vec<_>>()[..] else {
            return Err(format!(
                "{}: expected exactly one gRPC path template \"/<service>/{{method}}\", \
                 found {templates:?}",
                self.path
            ));
        };
        let service = self.service_name(template, consts)?;
        let fns = self.functions();
        let helpers: BTreeSet<&str> = fns
            .iter()
            .filter(|(_, _, sig, _)| {
                self.toks[sig.clone()].windows(5).any(|w| {
                    is_ident(Some(&w[0].0), "method")
                        && is_punct(Some(&w[1].0), ':')
                        && is_punct(Some(&w[2].0), '&')
                        && w[3].0 == Tok::Lifetime("static".into())
                        && is_ident(Some(&w[4].0), "str")
                })
            })
            .map(|(n, ..)| n.as_str())
            .collect();
        let mut out = Vec::new();
        for (name, line, sig, body) in &fns {
            if helpers.contains(name.as_str()) {
                continue;
            }
            let b = &self.toks[body.clone()];
            let methods: BTreeSet<String> = b
                .windows(4)
                .filter_map(|w| match (&w[0].0, &w[1].0, &w[2].0, &w[3].0) {
                    (Tok::Punct('.'), Tok::Ident(h), Tok::Punct('('), Tok::Str(m))
                        if helpers.contains(h.as_str()) =>
                    {
                        Some(m.clone())
                    }
                    _ => None,
                })
                .collect();
            if methods.is_empty() {
                continue;
            }
            let context = format!("fn {name}");
            let scope: Vec<&(Tok, usize)> = self.toks[sig.clone()].iter().chain(b.iter()).collect();
            out.push(self.call_site(&service, *line, context, &methods, &scope, known)?);
        }
        Ok(out)
    }

    fn call_site(
        &self,
        service: &str,
        line: usize,
        context: String,
        methods: &BTreeSet<String>,
        scope: &[&(Tok, usize)],
        known: &BTreeSet<String>,
    ) -> Result<CallSite, String> {
        let named = |suffix: &str| -> BTreeSet<String> {
            scope
                .iter()
                .filter_map(|(t, _)| match t {
                    Tok::Ident(x) if x.ends_with(suffix) && known.contains(x) => Some(x.clone()),
                    _ => None,
                })
                .collect()
        };
        let (requests, responses) = (named("Request"), named("Response"));
        let path = &self.path;
        match (
            &methods.iter().collect::<Vec<_>>()[..],
            &requests.iter().collect::<Vec<_>>()[..],
            &responses.iter().collect::<Vec<_>>()[..],
        ) {
            ([m], [req], [resp]) => Ok(CallSite {
                path: path.clone(),
                line,
                context,
                method: format!("/{service}/{m}"),
                request: (*req).clone(),
                response: (*resp).clone(),
            }),
            _ => Err(format!(
                "{path}:{line} ({context}): cannot pair the call: methods {methods:?}, \
                 request types {requests:?}, response types {responses:?} (expected one each)"
            )),
        }
    }

    /// A fake server's dispatch: the arms of `match grpc::method(&req).as_str() { … }`,
    /// each with the message types named in the arm and in the signatures of the `f.<fn>(…)`
    /// it calls. The service comes from `const NAME: &'static str = …` in the file.
    pub fn server_arms(
        &self,
        known: &BTreeSet<String>,
        consts: &BTreeMap<String, String>,
    ) -> Result<Vec<CallSite>, String> {
        let path = &self.path;
        let name_at = (0..self.toks.len())
            .find(|&i| {
                is_ident(self.tok(i), "const")
                    && is_ident(self.tok(i + 1), "NAME")
                    && is_punct(self.tok(i + 2), ':')
            })
            .ok_or_else(|| format!("{path}: no `const NAME` (tonic NamedService)"))?;
        let mut j = name_at;
        while j < self.toks.len() && !is_punct(self.tok(j), '=') {
            j += 1;
        }
        let service = match self.tok(j + 1) {
            Some(Tok::Str(s)) => s.clone(),
            Some(Tok::Ident(c)) => self.service_name(&format!("{{{c}}}"), consts)?,
            other => return Err(format!("{path}: const NAME = {other:?}?")),
        };
        let start = (0..self.toks.len())
            .find(|&i| {
                is_ident(self.tok(i), "match")
                    && is_ident(self.tok(i + 1), "grpc")
                    && is_ident(self.tok(i + 4), "method")
            })
            .ok_or_else(|| format!("{path}: no `match grpc::method(…)` dispatch"))?;
        let mut open = start;
        while open < self.toks.len() && !is_punct(self.tok(open), '{') {
            open += 1;
        }
        let end = matching(&self.toks, open)? - 1;
        let fns = self.functions();
        let mut out = Vec::new();
        let mut i = open + 1;
        while i < end {
            let line = self.line(i);
            let lit = match self.tok(i) {
                Some(Tok::Str(s)) => Some(s.clone()),
                Some(Tok::Ident(_)) => None, // the fallback arm (`other => …`)
                other => return Err(format!("{path}:{line}: unexpected {other:?} in dispatch")),
            };
            if !(is_punct(self.tok(i + 1), '=') && is_punct(self.tok(i + 2), '>')) {
                return Err(format!("{path}:{line}: expected `=>` in dispatch"));
            }
            let arm_start = i + 3;
            let arm_end = if is_punct(self.tok(arm_start), '{') {
                matching(&self.toks, arm_start)?
            } else {
                let mut k = arm_start;
                let mut d = 0i32;
                while k < end {
                    match self.tok(k) {
                        Some(Tok::Punct('(' | '[' | '{')) => d += 1,
                        Some(Tok::Punct(')' | ']' | '}')) => d -= 1,
                        Some(Tok::Punct(',')) if d == 0 => break,
                        _ => {}
                    }
                    k += 1;
                }
                k
            };
            i = if is_punct(self.tok(arm_end), ',') {
                arm_end + 1
            } else {
                arm_end
            };
            let Some(lit) = lit else { continue };
            let arm = &self.toks[arm_start..arm_end];
            let mut scope: Vec<&(Tok, usize)> = arm.iter().collect();
            for w in arm.windows(4) {
                if let (Tok::Ident(f), Tok::Punct('.'), Tok::Ident(called), Tok::Punct('(')) =
                    (&w[0].0, &w[1].0, &w[2].0, &w[3].0)
                    && f == "f"
                {
                    for (_, _, sig, _) in fns.iter().filter(|(n, ..)| n == called) {
                        scope.extend(self.toks[sig.clone()].iter());
                    }
                }
            }
            let methods = BTreeSet::from([lit.clone()]);
            let context = format!("match arm \"{lit}\"");
            out.push(self.call_site(&service, line, context, &methods, &scope, known)?);
        }
        Ok(out)
    }
}

fn field_from_attr(
    msg: &str,
    fname: &str,
    line: usize,
    attr: &[(Tok, usize)],
    ty: &[(Tok, usize)],
) -> Result<RustField, String> {
    let at = format!("line {line}: {msg}.{fname}");
    // attr is `( item, item, … )`
    let inner = attr
        .get(1..attr.len().saturating_sub(1))
        .ok_or_else(|| format!("{at}: empty #[prost]"))?;
    let mut kind = None;
    let mut label = None;
    let mut tag = None;
    for item in inner.split(|t| t.0 == Tok::Punct(',')) {
        let key = match item.first().map(|t| &t.0) {
            Some(Tok::Ident(k)) => k.as_str(),
            other => return Err(format!("{at}: unexpected {other:?} in #[prost]")),
        };
        let value = match item {
            [_, (Tok::Punct('='), _), (Tok::Str(v), _)] => Some(v.as_str()),
            [_] => None,
            _ => return Err(format!("{at}: cannot read `{}` in #[prost]", joined(item))),
        };
        match (key, value) {
            ("tag", Some(v)) => {
                tag = Some(
                    v.parse::<u32>()
                        .map_err(|e| format!("{at}: tag {v:?}: {e}"))?,
                );
            }
            ("optional" | "repeated", None) => label = Some(key.to_owned()),
            ("packed", Some(_)) => {}
            ("message", None) => kind = Some(Kind::Message),
            ("enumeration", Some(v)) => {
                kind = Some(Kind::Enumeration(
                    v.split("::").map(str::to_owned).collect(),
                ));
            }
            ("map", Some(v)) => {
                let (k, val) = v
                    .split_once(',')
                    .ok_or_else(|| format!("{at}: map = {v:?}"))?;
                kind = Some(Kind::Map(k.trim().to_owned(), val.trim().to_owned()));
            }
            ("bytes", Some(_)) => kind = Some(Kind::Scalar("bytes".into())),
            (s, None) if PROST_SCALARS.contains(&s) => kind = Some(Kind::Scalar(s.to_owned())),
            _ => {
                return Err(format!(
                    "{at}: this scanner does not know `{}` in #[prost] (teach it)",
                    joined(item)
                ));
            }
        }
    }
    let kind = kind.ok_or_else(|| format!("{at}: #[prost] names no type"))?;
    let tag = tag.ok_or_else(|| format!("{at}: #[prost] has no tag"))?;
    // The innermost generic argument's path; for a map the value type (the last argument).
    let mut inner_start = 0;
    let mut inner_end = ty.len();
    for (k, (t, _)) in ty.iter().enumerate() {
        match t {
            Tok::Punct('<') | Tok::Punct(',') => inner_start = k + 1,
            Tok::Punct('>') => {
                inner_end = k;
                break;
            }
            _ => {}
        }
    }
    let inner_type = ty
        .get(inner_start..inner_end)
        .unwrap_or_default()
        .iter()
        .filter_map(|(t, _)| match t {
            Tok::Ident(x) => Some(x.clone()),
            _ => None,
        })
        .collect();
    Ok(RustField {
        name: fname.to_owned(),
        line,
        tag,
        kind,
        label,
        attr: format!("#[prost{}]", joined(attr)),
        rust_type: joined(ty),
        inner_type,
    })
}
