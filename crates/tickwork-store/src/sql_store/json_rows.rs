//! Many rows as one JSON array bound to one statement (SQLite's `jsonb_each(?)`, PostgreSQL's
//! `jsonb_array_elements`): a batch is then one statement, prepared once whatever its size.
//! On SQLite it runs in one call to the driver's worker thread, where a statement a row cost a
//! call each and kept the one write connection waiting on a runtime busy with dispatches; on
//! PostgreSQL it replaces statements of a `CASE` arm and binds per row, each parsed and
//! planned anew.

use std::io::Write;

use crate::sql::{Arg, Kind};

/// The rows bound as one parameter, as a `FROM` item named `alias` whose rows are read with
/// [`json_field`] (SQLite and PostgreSQL).
pub(super) fn json_source(kind: Kind, alias: &str) -> String {
    match kind {
        // As `jsonb` the array is parsed once; as `json` each `->>` parsed its row's text again
        // from the start: 13% of the server's CPU at 20,000 fires a second.
        Kind::Postgres => format!("jsonb_array_elements(CAST(? AS jsonb)) AS {alias}(value)"),
        // `jsonb_each` parses the text once and hands each row over in SQLite's binary form,
        // which `->>` reads in place; `json_each` wrote each row back out as text for `->>`
        // to parse again: 8-9% of the admin's CPU at 10,000 fires a second.
        Kind::Sqlite | Kind::MySql => format!("jsonb_each(?) AS {alias}"),
    }
}

/// Value `n` of a row of `alias`, as the SQL type `ty` (SQLite reads JSON numbers as numbers
/// and needs no cast).
pub(super) fn json_field(kind: Kind, alias: &str, n: usize, ty: &str) -> String {
    match kind {
        Kind::Postgres if ty != "TEXT" => format!("CAST({alias}.value ->> {n} AS {ty})"),
        _ => format!("{alias}.value ->> {n}"),
    }
}

/// A JSON array of rows, each an array of values, read in SQL as `j.value ->> n`.
#[derive(Debug)]
pub(super) struct JsonRows {
    /// The text so far: JSON written by serde_json and ASCII, so always UTF-8.
    text: Vec<u8>,
    /// Values in the row being written; `None` before the first row.
    in_row: Option<usize>,
}

impl JsonRows {
    pub(super) fn with_capacity(rows: usize) -> Self {
        let mut text = Vec::with_capacity(2 + rows * 48);
        text.push(b'[');
        JsonRows { text, in_row: None }
    }

    /// Starts a row.
    pub(super) fn row(&mut self) -> &mut Self {
        if self.in_row.is_some() {
            self.text.extend_from_slice(b"],");
        }
        self.text.push(b'[');
        self.in_row = Some(0);
        self
    }

    fn sep(&mut self) {
        let n = self.in_row.as_mut().expect("a value outside a row");
        if *n > 0 {
            self.text.push(b',');
        }
        *n += 1;
    }

    pub(super) fn int(&mut self, v: i64) -> &mut Self {
        self.sep();
        // Writing to a Vec cannot fail.
        let _ = write!(self.text, "{v}");
        self
    }

    pub(super) fn opt_int(&mut self, v: Option<i64>) -> &mut Self {
        match v {
            Some(v) => self.int(v),
            None => self.null(),
        }
    }

    pub(super) fn str(&mut self, v: &str) -> &mut Self {
        self.sep();
        // Straight into the text, quoted and escaped; a str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.text, v);
        self
    }

    pub(super) fn opt_str(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.str(v),
            None => self.null(),
        }
    }

    /// A statement's value, as the JSON value its column reads back.
    pub(super) fn arg(&mut self, v: &Arg) -> &mut Self {
        match v {
            Arg::Int(v) => self.opt_int(*v),
            Arg::Int32(v) => self.opt_int(v.map(i64::from)),
            Arg::Text(v) => self.opt_str(v.as_deref()),
        }
    }

    pub(super) fn null(&mut self) -> &mut Self {
        self.sep();
        self.text.extend_from_slice(b"null");
        self
    }

    /// The array's text.
    pub(super) fn finish(mut self) -> String {
        if self.in_row.is_some() {
            self.text.push(b']');
        }
        self.text.push(b']');
        String::from_utf8(self.text).expect("JSON text is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_arrays_of_json_values() {
        let mut rows = JsonRows::with_capacity(2);
        rows.row().int(1).str("a \"b\"\n").null();
        rows.row().opt_int(Some(-2)).opt_str(None).opt_int(None);
        assert_eq!(rows.finish(), r#"[[1,"a \"b\"\n",null],[-2,null,null]]"#);
        assert_eq!(JsonRows::with_capacity(0).finish(), "[]");
        let mut rows = JsonRows::with_capacity(1);
        let args = [
            Arg::Int(Some(7)),
            Arg::Int32(None),
            Arg::Text(Some("x".into())),
        ];
        args.iter().fold(rows.row(), |r, a| r.arg(a));
        assert_eq!(rows.finish(), r#"[[7,null,"x"]]"#);
    }
}
