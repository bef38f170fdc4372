//! The comparison: every hand-written prost message, field, enum value and gRPC method
//! against the upstream schema. Each problem is one line naming the Rust side (file:line,
//! struct/field, attribute) and the upstream side (message/field, declaration, .proto file).

use std::collections::BTreeSet;

use super::proto::{Field, Label, Resolved, Schema, Type};
use super::rust_src::{CallSite, Kind, RustEnum, RustField, RustFile, RustMessage};

/// Rust structs/enums whose upstream name is not `<rust module>.<RustName>`:
/// (Rust path, upstream full name).
pub type Renames<'a> = &'a [(&'a str, &'a str)];

/// Fields deliberately declared with a different but wire-identical type: a Rust `int32`
/// for an upstream enum (both are varint int32 on the wire). (Rust struct path, field, why.)
pub type WireCompatible<'a> = &'a [(&'a str, &'a str, &'a str)];

#[derive(Debug, Default)]
pub struct Report {
    pub problems: Vec<String>,
    pub messages: usize,
    pub fields: usize,
    pub enums: usize,
    pub enum_values: usize,
    pub call_sites: usize,
    pub methods: BTreeSet<String>,
}

pub struct Checker<'a> {
    pub schema: &'a Schema,
    pub files: &'a [RustFile],
    pub renames: Renames<'a>,
    pub wire_compatible: WireCompatible<'a>,
}

/// `UpperSnake` of a Rust variant name: `Rdonly` → `RDONLY`, `DryRun` → `DRY_RUN`.
fn upper_snake(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_uppercase());
    }
    out
}

impl Checker<'_> {
    fn all_messages(&self) -> impl Iterator<Item = (&RustFile, &RustMessage)> {
        self.files
            .iter()
            .flat_map(|f| f.messages.iter().map(move |m| (f, m)))
    }

    fn all_enums(&self) -> impl Iterator<Item = (&RustFile, &RustEnum)> {
        self.files
            .iter()
            .flat_map(|f| f.enums.iter().map(move |e| (f, e)))
    }

    /// The upstream full name of a Rust `module::Name`.
    pub fn upstream_name(&self, rust_path: &str) -> String {
        self.renames
            .iter()
            .find(|(r, _)| *r == rust_path)
            .map_or_else(|| rust_path.replace("::", "."), |(_, u)| (*u).to_owned())
    }

    /// A Rust type path written in `module` (`Shard`, `topodata::Shard`,
    /// `super::topodata::Shard`) → the `module::Name` of a scanned struct or enum.
    fn resolve_rust(&self, module: &str, path: &[String], enums: bool) -> Result<String, String> {
        let names: Vec<(String, String)> = if enums {
            self.all_enums()
                .map(|(_, e)| (e.module.clone(), e.name.clone()))
                .collect()
        } else {
            self.all_messages()
                .map(|(_, m)| (m.module.clone(), m.name.clone()))
                .collect()
        };
        let segs: Vec<&String> = path
            .iter()
            .filter(|s| !matches!(s.as_str(), "super" | "crate" | "self"))
            .collect();
        let Some(name) = segs.last() else {
            return Err(format!("empty type path {path:?}"));
        };
        let found: Vec<&(String, String)> = match segs.len() {
            1 => {
                let here: Vec<_> = names
                    .iter()
                    .filter(|(m, n)| m == module && n == *name)
                    .collect();
                if here.is_empty() {
                    names.iter().filter(|(_, n)| n == *name).collect()
                } else {
                    here
                }
            }
            k => {
                let m = segs[k - 2];
                names
                    .iter()
                    .filter(|(mm, n)| mm == m && n == *name)
                    .collect()
            }
        };
        match found[..] {
            [(m, n)] => Ok(format!("{m}::{n}")),
            [] => Err(format!(
                "Rust type `{}` is not a scanned {}",
                path.join("::"),
                if enums { "prost enum" } else { "prost message" }
            )),
            _ => Err(format!(
                "Rust type `{}` is ambiguous: {found:?}",
                path.join("::")
            )),
        }
    }

    pub fn run(&self, calls: &[CallSite]) -> Report {
        let mut r = Report::default();
        let mut seen = BTreeSet::new();
        for (file, m) in self.all_messages() {
            let rust = format!("{}::{}", m.module, m.name);
            if !seen.insert(rust.clone()) {
                r.problems.push(format!(
                    "{}:{}: Rust struct {rust} is scanned twice",
                    file.path, m.line
                ));
            }
            self.message(file, m, &mut r);
        }
        for (file, e) in self.all_enums() {
            self.enumeration(file, e, &mut r);
        }
        for c in calls {
            self.call(c, &mut r);
        }
        for (rust, _) in self.renames {
            let used = self
                .all_messages()
                .any(|(_, m)| format!("{}::{}", m.module, m.name) == *rust)
                || self
                    .all_enums()
                    .any(|(_, e)| format!("{}::{}", e.module, e.name) == *rust);
            if !used {
                r.problems.push(format!(
                    "rename table: `{rust}` is not a scanned Rust struct or enum (stale entry)"
                ));
            }
        }
        for (rust, field, _) in self.wire_compatible {
            let used = self.all_messages().any(|(_, m)| {
                format!("{}::{}", m.module, m.name) == *rust
                    && m.fields.iter().any(|f| f.name == *field)
            });
            if !used {
                r.problems.push(format!(
                    "wire-compatible table: `{rust}.{field}` is not a scanned field (stale entry)"
                ));
            }
        }
        r
    }

    fn message(&self, file: &RustFile, m: &RustMessage, r: &mut Report) {
        let rust = format!("{}::{}", m.module, m.name);
        let up_name = self.upstream_name(&rust);
        r.messages += 1;
        let Some(up) = self.schema.messages.get(&up_name) else {
            let hint = self
                .schema
                .messages
                .keys()
                .find(|k| k.eq_ignore_ascii_case(&up_name))
                .map(|k| format!(" (upstream has `{k}`: add it to the rename table)"))
                .unwrap_or_default();
            r.problems.push(format!(
                "{}:{}: Rust struct {rust} maps to upstream message `{up_name}`, which upstream \
                 does not define{hint}",
                file.path, m.line
            ));
            return;
        };
        let mut tags = BTreeSet::new();
        for f in &m.fields {
            r.fields += 1;
            let at = format!(
                "{}:{}: Rust {rust}.{} `{}`",
                file.path, f.line, f.name, f.attr
            );
            if !tags.insert(f.tag) {
                r.problems
                    .push(format!("{at}: tag {} is used twice in {rust}", f.tag));
            }
            let Some(uf) = up.fields.iter().find(|u| u.name == f.name) else {
                let by_tag = up
                    .fields
                    .iter()
                    .find(|u| u.number == f.tag)
                    .map(|u| format!("; its field {} is {}", f.tag, u.describe()))
                    .unwrap_or_default();
                r.problems.push(format!(
                    "{at}: upstream message {up_name} ({}) has no field named `{}`{by_tag}",
                    up.file, f.name
                ));
                continue;
            };
            let upstream = format!(
                "upstream {up_name}.{} {} ({})",
                uf.name,
                uf.describe(),
                up.file
            );
            if uf.number != f.tag {
                r.problems.push(format!(
                    "{at}: tag {} but {upstream} is field number {}",
                    f.tag, uf.number
                ));
            }
            if let Err(why) = self.field_type(m, f, uf, &rust) {
                r.problems.push(format!("{at}: {why}; {upstream}"));
            }
        }
    }

    /// Whether the prost attribute (and the Rust type it holds) encodes the upstream type.
    fn field_type(
        &self,
        m: &RustMessage,
        f: &RustField,
        uf: &Field,
        rust: &str,
    ) -> Result<(), String> {
        let label = f.label.as_deref();
        let want_scalar_label = |l: Label| match l {
            Label::Singular => None,
            Label::Optional => Some("optional"),
            Label::Repeated => Some("repeated"),
        };
        let label_ok = |want: Option<&str>| {
            if label == want {
                Ok(())
            } else {
                Err(format!(
                    "label is {} but upstream's is {}",
                    label.unwrap_or("(none)"),
                    want.unwrap_or("(none)")
                ))
            }
        };
        match &uf.ty {
            Type::Scalar(s) => {
                match &f.kind {
                    Kind::Scalar(k) if k == s => {}
                    _ => {
                        return Err(format!(
                            "type is {} but upstream's is {s}",
                            kind_str(&f.kind)
                        ));
                    }
                }
                label_ok(want_scalar_label(uf.label))
            }
            Type::Map { key, value } => {
                let Kind::Map(rk, rv) = &f.kind else {
                    return Err(format!(
                        "type is {} but upstream's is {}",
                        kind_str(&f.kind),
                        uf.ty.describe()
                    ));
                };
                if rk != key {
                    return Err(format!("map key is {rk} but upstream's is {key}"));
                }
                label_ok(None)?;
                match (&**value, self.schema.resolve_type(value)) {
                    (Type::Scalar(s), _) if rv == s => Ok(()),
                    (_, Some(Resolved::Message(full))) if rv == "message" => {
                        self.rust_message_is(m, f, &full)
                    }
                    (_, Some(Resolved::Enum(full))) if rv.starts_with("enumeration(") => {
                        let p = rv
                            .trim_start_matches("enumeration(")
                            .trim_end_matches(')')
                            .split("::")
                            .map(str::to_owned)
                            .collect::<Vec<_>>();
                        self.rust_enum_is(m, &p, &full)
                    }
                    (v, res) => Err(format!(
                        "map value is {rv} but upstream's is {} ({})",
                        v.describe(),
                        res.map_or("unresolved".into(), |x| x.describe())
                    )),
                }
            }
            Type::Named { .. } => match self.schema.resolve_type(&uf.ty) {
                Some(Resolved::Message(full)) => {
                    if f.kind != Kind::Message {
                        return Err(format!(
                            "type is {} but upstream's is message {full}",
                            kind_str(&f.kind)
                        ));
                    }
                    // prost gives every singular message field presence: `optional`.
                    label_ok(Some(match uf.label {
                        Label::Repeated => "repeated",
                        Label::Singular | Label::Optional => "optional",
                    }))?;
                    self.rust_message_is(m, f, &full)
                }
                Some(Resolved::Enum(full)) => {
                    match &f.kind {
                        Kind::Enumeration(p) => self.rust_enum_is(m, p, &full)?,
                        Kind::Scalar(s)
                            if s == "int32"
                                && self
                                    .wire_compatible
                                    .iter()
                                    .any(|(r, fl, _)| *r == rust && *fl == f.name) => {}
                        other => {
                            return Err(format!(
                                "type is {} but upstream's is enum {full} (a deliberate int32 \
                                 goes in the wire-compatible table)",
                                kind_str(other)
                            ));
                        }
                    }
                    label_ok(want_scalar_label(uf.label))
                }
                None => Err(format!(
                    "upstream type `{}` does not resolve",
                    uf.ty.describe()
                )),
            },
        }
    }

    /// The Rust type a message field holds maps to upstream message `full`.
    fn rust_message_is(&self, m: &RustMessage, f: &RustField, full: &str) -> Result<(), String> {
        let rust = self.resolve_rust(&m.module, &f.inner_type, false)?;
        let mapped = self.upstream_name(&rust);
        if mapped == full {
            Ok(())
        } else {
            Err(format!(
                "it holds Rust `{}` = {rust} (↔ upstream {mapped}) but upstream's type is {full}",
                f.rust_type
            ))
        }
    }

    fn rust_enum_is(&self, m: &RustMessage, path: &[String], full: &str) -> Result<(), String> {
        let rust = self.resolve_rust(&m.module, path, true)?;
        let mapped = self.upstream_name(&rust);
        if mapped == full {
            Ok(())
        } else {
            Err(format!(
                "enumeration {rust} (↔ upstream {mapped}) but upstream's type is enum {full}"
            ))
        }
    }

    fn enumeration(&self, file: &RustFile, e: &RustEnum, r: &mut Report) {
        let rust = format!("{}::{}", e.module, e.name);
        let up_name = self.upstream_name(&rust);
        r.enums += 1;
        let Some(up) = self.schema.enums.get(&up_name) else {
            r.problems.push(format!(
                "{}:{}: Rust enum {rust} maps to upstream enum `{up_name}`, which upstream does \
                 not define",
                file.path, e.line
            ));
            return;
        };
        for (v, n, line) in &e.variants {
            r.enum_values += 1;
            // prost strips the enum's name from value names (`FOO_BAR` in enum Foo → `Bar`).
            let plain = upper_snake(v);
            let prefixed = format!("{}_{plain}", upper_snake(&e.name));
            let found = [&plain, &prefixed]
                .into_iter()
                .find_map(|c| up.values.get(c).map(|u| (c.clone(), *u)));
            match found {
                None => r.problems.push(format!(
                    "{}:{line}: Rust {rust}::{v} = {n}: upstream enum {up_name} ({}) has no value \
                     {plain} (values: {:?})",
                    file.path, up.file, up.values
                )),
                Some((name, u)) if u != *n => r.problems.push(format!(
                    "{}:{line}: Rust {rust}::{v} = {n} but upstream {up_name}.{name} = {u} ({})",
                    file.path, up.file
                )),
                Some(_) => {}
            }
        }
    }

    fn call(&self, c: &CallSite, r: &mut Report) {
        r.call_sites += 1;
        r.methods.insert(c.method.clone());
        let at = format!("{}:{} ({}): `{}`", c.path, c.line, c.context, c.method);
        let parts: Vec<&str> = c.method.trim_start_matches('/').split('/').collect();
        let [service, method] = parts[..] else {
            r.problems
                .push(format!("{at}: not a /<service>/<method> path"));
            return;
        };
        let Some(svc) = self.schema.services.get(service) else {
            r.problems
                .push(format!("{at}: upstream defines no service `{service}`"));
            return;
        };
        let Some(up) = svc.methods.get(method) else {
            r.problems.push(format!(
                "{at}: upstream service {service} ({}) has no rpc {method}",
                svc.file
            ));
            return;
        };
        for (what, rust, upstream) in [
            ("request", &c.request, &up.input),
            ("response", &c.response, &up.output),
        ] {
            let mapped = match self.resolve_rust("", std::slice::from_ref(rust), false) {
                Ok(p) => self.upstream_name(&p),
                Err(e) => {
                    r.problems.push(format!("{at}: {what}: {e}"));
                    continue;
                }
            };
            if mapped != *upstream {
                r.problems.push(format!(
                    "{at}: {what} is Rust {rust} (↔ upstream {mapped}) but upstream rpc \
                     {service}.{method} has {what} {upstream} ({})",
                    svc.file
                ));
            }
        }
        if up.client_streaming || up.server_streaming {
            r.problems.push(format!(
                "{at}: called as unary but upstream rpc {service}.{method} streams (client {}, \
                 server {})",
                up.client_streaming, up.server_streaming
            ));
        }
    }
}

fn kind_str(k: &Kind) -> String {
    match k {
        Kind::Scalar(s) => s.clone(),
        Kind::Message => "message".into(),
        Kind::Enumeration(p) => format!("enumeration {}", p.join("::")),
        Kind::Map(k, v) => format!("map<{k}, {v}>"),
    }
}
