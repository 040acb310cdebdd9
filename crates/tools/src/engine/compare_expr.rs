//! dcmp's output expressions (`-o EXPR:FILE`, used by `sync -o` and `cmp -o`): which paths of
//! two trees go into a list, by how each field of the pair compares.
//!
//! `EXPR := CONJ (',' CONJ)*` (any conjunction holds), `CONJ := COND ('@' COND)*` (all
//! conditions hold), `COND := FIELD=STATE`, with fields `EXIST TYPE SIZE UID GID ATIME MTIME CTIME
//! PERM ACL CONTENT` and states `COMMON DIFFER ONLY_SRC ONLY_DEST`. As in dcmp, `ONLY_SRC` and
//! `ONLY_DEST` are states of `EXIST` only; `EXIST=DIFFER` holds for a path on either side only;
//! a path present on one side only matches no condition on another field.
//! (`MTIME=DIFFER@SIZE=COMMON,EXIST=ONLY_SRC:changed.mfu`: see the test
//! `an_expression_matches_its_pairs`.)

/// A compared property of a pair of entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Present on both sides or one.
    Exist,
    /// File type.
    Type,
    /// Size in bytes.
    Size,
    /// Owner id.
    Uid,
    /// Group id.
    Gid,
    /// Access time.
    Atime,
    /// Modification time.
    Mtime,
    /// Status-change time.
    Ctime,
    /// Permission bits.
    Perm,
    /// POSIX ACLs (`system.posix_acl_access`).
    Acl,
    /// File data.
    Content,
}

/// Every field, in dcmp's order.
pub const FIELDS: [Field; 11] = [
    Field::Exist,
    Field::Type,
    Field::Size,
    Field::Uid,
    Field::Gid,
    Field::Atime,
    Field::Mtime,
    Field::Ctime,
    Field::Perm,
    Field::Acl,
    Field::Content,
];

impl Field {
    /// The name in expressions (`MTIME`).
    pub fn name(self) -> &'static str {
        match self {
            Field::Exist => "EXIST",
            Field::Type => "TYPE",
            Field::Size => "SIZE",
            Field::Uid => "UID",
            Field::Gid => "GID",
            Field::Atime => "ATIME",
            Field::Mtime => "MTIME",
            Field::Ctime => "CTIME",
            Field::Perm => "PERM",
            Field::Acl => "ACL",
            Field::Content => "CONTENT",
        }
    }

    /// The words dcmp's report uses for the field (`modification time`).
    pub fn words(self) -> &'static str {
        match self {
            Field::Exist => "existence",
            Field::Type => "type",
            Field::Size => "size",
            Field::Uid => "user ID",
            Field::Gid => "group ID",
            Field::Atime => "access time",
            Field::Mtime => "modification time",
            Field::Ctime => "change time",
            Field::Perm => "permission",
            Field::Acl => "Access Control Lists",
            Field::Content => "content",
        }
    }
}

/// How one field of a pair compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Equal on both sides.
    Common,
    /// Present on both sides, different.
    Differ,
    /// Only the source has the path.
    OnlySrc,
    /// Only the destination has the path.
    OnlyDest,
}

impl State {
    fn parse(s: &str) -> Option<State> {
        Some(match s {
            "COMMON" => State::Common,
            "DIFFER" => State::Differ,
            "ONLY_SRC" => State::OnlySrc,
            "ONLY_DEST" => State::OnlyDest,
            _ => return None,
        })
    }
}

/// The states of all fields of one pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct States([State; 11]);

impl States {
    /// A pair present on both sides, every field equal.
    pub fn both_common() -> States {
        States([State::Common; 11])
    }

    /// A path on one side only (`OnlySrc` or `OnlyDest` in every field).
    pub fn only(side: State) -> States {
        States([side; 11])
    }

    /// Set one field.
    pub fn set(&mut self, f: Field, s: State) {
        self.0[f as usize] = s;
    }

    /// Mark `f` as differing when `differs`.
    pub fn differ_if(&mut self, f: Field, differs: bool) {
        if differs {
            self.set(f, State::Differ);
        }
    }

    /// The state of one field.
    pub fn get(&self, f: Field) -> State {
        self.0[f as usize]
    }
}

/// One `FIELD=STATE` condition.
pub type Condition = (Field, State);

/// True when `c` holds for a pair with states `s`: `EXIST=DIFFER` for a path on one side only,
/// otherwise the field's state is the condition's.
pub fn holds(c: Condition, s: &States) -> bool {
    match c {
        (Field::Exist, State::Differ) => {
            matches!(s.get(Field::Exist), State::OnlySrc | State::OnlyDest)
        }
        (f, st) => s.get(f) == st,
    }
}

/// A conjunction in dcmp's report words: `exist in both directories and have different types`.
pub fn describe(all: &[Condition]) -> String {
    let words: Vec<String> = all
        .iter()
        .map(|&(f, st)| match (f, st) {
            (Field::Exist, State::OnlySrc) => "exist only in source directory".to_string(),
            (Field::Exist, State::OnlyDest) => "exist only in destination directory".to_string(),
            (Field::Exist, State::Common) => "exist in both directories".to_string(),
            (Field::Exist, State::Differ) => "exist only in one directory".to_string(),
            (f, State::Differ) => format!("have different {}s", f.words()),
            (f, _) => format!("have the same {}", f.words()),
        })
        .collect();
    words.join(" and ")
}

/// Parse an expression (`EXPR`, without `:FILE`) into an OR of ANDs of conditions.
pub fn parse_expr(expr: &str) -> Result<Vec<Vec<Condition>>, String> {
    let mut any_of = Vec::new();
    for conj in expr.split(',') {
        let mut all = Vec::new();
        for cond in conj.split('@') {
            // Name the condition, and the whole expression when it has more.
            let at = if cond == expr {
                format!("'{cond}'")
            } else {
                format!("'{cond}' in '{expr}'")
            };
            let (f, s) = cond
                .split_once('=')
                .ok_or_else(|| format!("{at}: expected FIELD=STATE"))?;
            let field = FIELDS
                .iter()
                .copied()
                .find(|x| x.name() == f)
                .ok_or_else(|| {
                    format!("unknown field '{f}' in '{expr}' (EXIST TYPE SIZE UID GID ATIME MTIME CTIME PERM ACL CONTENT)")
                })?;
            let state = State::parse(s).ok_or_else(|| {
                format!("unknown state '{s}' in '{expr}' (COMMON DIFFER ONLY_SRC ONLY_DEST)")
            })?;
            if field != Field::Exist && matches!(state, State::OnlySrc | State::OnlyDest) {
                return Err(format!(
                    "{at}: ONLY_SRC and ONLY_DEST are states of EXIST only"
                ));
            }
            all.push((field, state));
        }
        any_of.push(all);
    }
    Ok(any_of)
}

/// One `-o EXPR:FILE` argument: the expression and the list file it selects for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// OR of ANDs of (field, state) conditions.
    pub any_of: Vec<Vec<Condition>>,
    /// The list file to write, as given.
    pub file: Vec<u8>,
}

impl Output {
    /// Parse `EXPR:FILE` (the file name may itself hold `:`; the first `:` ends the expression).
    /// The file name is taken as bytes, whatever they are.
    pub fn parse(arg: impl AsRef<[u8]>) -> Result<Output, String> {
        let arg = arg.as_ref();
        let shown = String::from_utf8_lossy(arg);
        let Some(colon) = arg.iter().position(|&c| c == b':') else {
            return Err(format!(
                "'{shown}': expected EXPR:FILE, e.g. MTIME=DIFFER:changed.mfu"
            ));
        };
        let (expr, file) = (&arg[..colon], &arg[colon + 1..]);
        if file.is_empty() {
            return Err(format!("'{shown}': no output file after ':'"));
        }
        Ok(Output {
            any_of: parse_expr(&String::from_utf8_lossy(expr))?,
            file: file.to_vec(),
        })
    }

    /// The command-line parser of `-o EXPR:FILE` arguments ([`Output::parse`] on the raw
    /// bytes, so FILE may be any name the file system allows).
    pub(crate) fn value_parser() -> impl clap::builder::TypedValueParser<Value = Output> {
        use clap::builder::TypedValueParser;
        clap::builder::OsStringValueParser::new()
            .try_map(|arg| Output::parse(std::os::unix::ffi::OsStrExt::as_bytes(arg.as_os_str())))
    }

    /// The first conjunction the pair's states satisfy (dcmp counts a path under that one).
    pub(crate) fn first_match(&self, s: &States) -> Option<usize> {
        self.any_of
            .iter()
            .position(|all| all.iter().all(|&c| holds(c, s)))
    }

    /// True when the pair's states satisfy the expression.
    pub(crate) fn matches(&self, s: &States) -> bool {
        self.first_match(s).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expression_matches_its_pairs() {
        let out = Output::parse("MTIME=DIFFER@SIZE=COMMON,EXIST=ONLY_SRC:changed.mfu").unwrap();
        assert_eq!(out.file, b"changed.mfu");
        let mut pair = States::both_common();
        pair.set(Field::Mtime, State::Differ);
        assert!(out.matches(&pair));
        assert!(out.matches(&States::only(State::OnlySrc)));
        assert!(!out.matches(&States::only(State::OnlyDest)));
    }

    #[test]
    fn bad_expressions_name_the_problem() {
        assert!(Output::parse("MTIME=DIFFER")
            .unwrap_err()
            .contains("EXPR:FILE"));
        assert!(Output::parse("MTIME=SAME:x")
            .unwrap_err()
            .contains("unknown state"));
        assert!(Output::parse("COLOR=DIFFER:x")
            .unwrap_err()
            .contains("unknown field"));
        assert!(Output::parse("MTIME=DIFFER:").is_err());
        assert!(Output::parse("SIZE=ONLY_SRC:x")
            .unwrap_err()
            .contains("EXIST only"));
        let o = Output::parse("EXIST=COMMON@SIZE=DIFFER:a:b").unwrap();
        assert_eq!(o.file, b"a:b");
        let odd = Output::parse(b"EXIST=DIFFER:odd\xff:name").unwrap();
        assert_eq!(odd.file, b"odd\xff:name");
        assert!(Output::parse(b"MTIME=DIFFER\xff")
            .unwrap_err()
            .contains("EXPR:FILE"));
        assert!(Output::parse(b"MTIME=\xff:x")
            .unwrap_err()
            .contains("unknown state"));
        assert_eq!(
            o.any_of,
            vec![vec![
                (Field::Exist, State::Common),
                (Field::Size, State::Differ)
            ]]
        );
    }

    #[test]
    fn one_sided_paths_match_only_exist_conditions() {
        let only_src = States::only(State::OnlySrc);
        let only_dest = States::only(State::OnlyDest);
        let differ = Output::parse("EXIST=DIFFER:x").unwrap();
        assert!(differ.matches(&only_src) && differ.matches(&only_dest));
        assert!(!differ.matches(&States::both_common()));
        let types = Output::parse("TYPE=DIFFER,TYPE=COMMON:x").unwrap();
        assert!(!types.matches(&only_src));
        let mut pair = States::both_common();
        pair.set(Field::Content, State::Differ);
        let o = Output::parse("TYPE=COMMON@CONTENT=DIFFER,SIZE=DIFFER:x").unwrap();
        assert_eq!(o.first_match(&pair), Some(0));
        pair.set(Field::Size, State::Differ);
        pair.set(Field::Type, State::Differ);
        assert_eq!(o.first_match(&pair), Some(1));
    }

    #[test]
    fn descriptions_use_dcmps_words() {
        let e = parse_expr("EXIST=COMMON@TYPE=DIFFER").unwrap();
        assert_eq!(
            describe(&e[0]),
            "exist in both directories and have different types"
        );
        let e = parse_expr("EXIST=COMMON@CONTENT=COMMON").unwrap();
        assert_eq!(
            describe(&e[0]),
            "exist in both directories and have the same content"
        );
    }
}
