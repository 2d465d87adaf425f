//! Quartz cron syntax: checks every field with a message that names it, and rewrites the
//! expression into the syntax `croner` reads.
//!
//! `croner` does the calendar matching (`L`, `W`, `LW`, `nL`, `n#k`, steps, lists). What it
//! lacks is done here: Quartz's rules (exactly one of day-of-month and day-of-week is `?`, the
//! year range, `#` and `nL` standing alone), ranges that wrap (`22-2`, `NOV-FEB`), `L-n`, and
//! messages a user can act on. The rewrite uses numbers only, so croner's name handling (a plain
//! text substitution over the whole expression) never sees user text.

use crate::Error;

/// The first and last year a year field may name. Without a year field, a schedule has no end.
pub const MIN_YEAR: u32 = 1970;
/// See [`MIN_YEAR`].
pub const MAX_YEAR: u32 = 2099;

const MONTH_NAMES: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// What one field accepts.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    /// Names standing for `min`, `min + 1`, ... (months and days of the week).
    names: &'static [&'static str],
    /// Whether a range may run past `max` and wrap to `min` (`22-2`).
    wraps: bool,
    /// The largest step.
    max_step: u32,
}

const SECONDS: Field = Field::plain("seconds", 0, 59);
const MINUTES: Field = Field::plain("minutes", 0, 59);
const HOURS: Field = Field::plain("hours", 0, 23);
const DAY_OF_MONTH: Field = Field::plain("day-of-month", 1, 31);
const MONTH: Field = Field {
    names: MONTH_NAMES,
    ..Field::plain("month", 1, 12)
};
const DAY_OF_WEEK: Field = Field {
    names: DAY_NAMES,
    ..Field::plain("day-of-week", 1, 7)
};
const YEAR: Field = Field {
    wraps: false,
    max_step: MAX_YEAR - MIN_YEAR,
    ..Field::plain("year", MIN_YEAR, MAX_YEAR)
};

impl Field {
    const fn plain(name: &'static str, min: u32, max: u32) -> Field {
        Field {
            name,
            min,
            max,
            names: &[],
            wraps: true,
            max_step: max,
        }
    }

    fn err(&self, message: impl Into<String>) -> Error {
        err(self.name, message)
    }

    /// Reads one value: a number in range, or a name where the field has names.
    fn value(&self, token: &str) -> Result<u32, Error> {
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            // Longer than any valid value: out of range rather than an overflow.
            let n = token.parse::<u32>().unwrap_or(u32::MAX);
            if n < self.min || n > self.max {
                return Err(self.err(format!(
                    "\"{token}\" is out of range {}-{}",
                    self.min, self.max
                )));
            }
            return Ok(n);
        }
        if let Some(i) = self
            .names
            .iter()
            .position(|name| name.eq_ignore_ascii_case(token))
        {
            return Ok(self.min + i as u32);
        }
        Err(self.not_a_value(token))
    }

    /// The message for a token that is neither a number nor a name of this field.
    fn not_a_value(&self, token: &str) -> Error {
        if token.is_empty() {
            return self.err("a value is missing");
        }
        for (special, fields) in [
            ('?', "day-of-month and day-of-week"),
            ('L', "day-of-month and day-of-week"),
            ('W', "day-of-month"),
            ('#', "day-of-week"),
        ] {
            // Only worth saying in a field where the character is not allowed.
            let here = fields.split(" and ").any(|field| field == self.name);
            if !here && (token.contains(special) || token.contains(special.to_ascii_lowercase())) {
                return self.err(format!(
                    "\"{token}\": \"{special}\" is only allowed in {fields}"
                ));
            }
        }
        match self.names {
            [] => self.err(format!("\"{token}\" is not a number")),
            names => self.err(format!(
                "\"{token}\" is neither a number {}-{} nor a name {}-{}",
                self.min,
                self.max,
                names[0],
                names[names.len() - 1]
            )),
        }
    }

    /// Rewrites a field without special characters (`*`, numbers, names, ranges, lists,
    /// steps) for croner.
    fn rewrite(&self, text: &str) -> Result<String, Error> {
        let mut out = Vec::new();
        for item in text.split(',') {
            if item.is_empty() {
                return Err(self.err(format!("\"{text}\" has an empty list item")));
            }
            match self.item(item)? {
                // `*` anywhere in a list means every value; croner only reads `*` alone.
                None => return Ok("*".to_owned()),
                Some(rewritten) => out.push(rewritten),
            }
        }
        Ok(out.join(","))
    }

    /// Rewrites one list item; `None` for a plain `*`.
    fn item(&self, item: &str) -> Result<Option<String>, Error> {
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => (base, Some(self.step(item, step)?)),
            None => (item, None),
        };
        // Quartz reads a missing start (`/5`) as `*/5`.
        if base == "*" || (base.is_empty() && step.is_some()) {
            return Ok(step.map(|step| self.stepped(self.min, self.max, step)));
        }
        let (start, end) = match base.split_once('-') {
            Some((start, end)) => (self.value(start)?, Some(self.value(end)?)),
            None => (self.value(base)?, None),
        };
        Ok(Some(match (end, step) {
            (None, None) => start.to_string(),
            // `a/n` runs from `a` to the end of the field.
            (None, Some(step)) => self.stepped(start, self.max, step),
            (Some(end), step) if start <= end => match step {
                None => format!("{start}-{end}"),
                Some(step) => self.stepped(start, end, step),
            },
            (Some(end), step) => {
                if !self.wraps {
                    return Err(self.err(format!(
                        "\"{base}\" is not a valid range: it ends before it starts"
                    )));
                }
                self.wrapped(start, end, step.unwrap_or(1))
            }
        }))
    }

    fn step(&self, item: &str, step: &str) -> Result<u32, Error> {
        if step.is_empty() || !step.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err(format!("\"{item}\": the step \"{step}\" is not a number")));
        }
        let n = step.parse::<u32>().unwrap_or(u32::MAX);
        if n == 0 || n > self.max_step {
            return Err(self.err(format!(
                "\"{item}\": the step \"{step}\" is out of range 1-{}",
                self.max_step
            )));
        }
        Ok(n)
    }

    /// `start-end/step` in croner's syntax, always with both ends: croner's own `*/n` and `a/n`
    /// would run its year field from 1 or to 5000, where Quartz's runs 1970-2099.
    fn stepped(&self, start: u32, end: u32, step: u32) -> String {
        format!("{start}-{end}/{step}")
    }

    /// A range that runs past the end of the field and on from its start, as a list: Quartz
    /// keeps counting the step across the wrap (`50-10/5` is 50, 55, 0, 5, 10).
    fn wrapped(&self, start: u32, end: u32, step: u32) -> String {
        let span = self.max - self.min + 1;
        let last = end + span;
        let mut values = Vec::new();
        let mut v = start;
        while v <= last {
            values.push(((v - self.min) % span + self.min).to_string());
            v += step;
        }
        values.join(",")
    }
}

fn err(field: &'static str, message: impl Into<String>) -> Error {
    Error::Cron {
        field,
        message: message.into(),
    }
}

/// A day-of-month rule croner cannot express, applied by the wrapper after croner's search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum DayRule {
    /// `L-n`: the n-th day before the last day of the month (n >= 1).
    BeforeLast(u8),
    /// `L-nW`: the weekday nearest to that day, within the month.
    WeekdayNearBeforeLast(u8),
}

impl DayRule {
    /// The day of `year`-`month` this rule selects, if the month has it.
    pub(crate) fn day_in(self, year: i16, month: i8) -> Option<i8> {
        let first = jiff::civil::Date::new(year, month, 1).ok()?;
        let last = first.days_in_month();
        let (n, nearest_weekday) = match self {
            DayRule::BeforeLast(n) => (n, false),
            DayRule::WeekdayNearBeforeLast(n) => (n, true),
        };
        let day = last - n as i8;
        if day < 1 {
            return None;
        }
        if !nearest_weekday {
            return Some(day);
        }
        // Quartz's `W`: a Saturday moves back to Friday and a Sunday on to Monday, except that
        // the move never leaves the month.
        use jiff::civil::Weekday;
        Some(match first.with().day(day).build().ok()?.weekday() {
            Weekday::Saturday if day > 1 => day - 1,
            Weekday::Saturday => day + 2,
            Weekday::Sunday if day < last => day + 1,
            Weekday::Sunday => day - 2,
            _ => day,
        })
    }
}

/// An expression checked and rewritten for croner.
#[derive(Debug)]
pub(super) struct Rewritten {
    /// Seven fields in croner's syntax.
    pub pattern: String,
    pub day_rule: Option<DayRule>,
}

/// Checks a Quartz expression and rewrites it for croner.
pub(super) fn rewrite(expr: &str) -> Result<Rewritten, Error> {
    let text = expr.trim();
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() != 6 && fields.len() != 7 {
        let what = if fields.is_empty() {
            "is empty".to_owned()
        } else {
            format!("\"{text}\" has {} fields", fields.len())
        };
        return Err(err(
            "expression",
            format!(
                "{what}; expected 6 or 7: seconds minutes hours day-of-month month day-of-week \
                 [year]"
            ),
        ));
    }

    let (mut dom, mut dow) = (fields[3], fields[5]);
    for (field, text) in [(&DAY_OF_MONTH, dom), (&DAY_OF_WEEK, dow)] {
        if text.contains('?') && text != "?" {
            return Err(field.err(format!("\"{text}\": \"?\" must stand alone")));
        }
    }
    // Quartz wants exactly one of the two to be `?`; a `*` in one of them reads as `?`, so that
    // `0 0 12 * * *` is every day at noon.
    match (dom, dow) {
        ("?", "?") => {
            return Err(err(
                "day-of-week",
                "\"?\" cannot be used when day-of-month is also \"?\"; give the days in one of \
                 them",
            ));
        }
        ("?", _) | (_, "?") => {}
        ("*", _) => dom = "?",
        (_, "*") => dow = "?",
        _ => {
            return Err(err(
                "day-of-week",
                format!(
                    "\"{dow}\" cannot be used together with day-of-month \"{dom}\"; set one of \
                     them to \"?\""
                ),
            ));
        }
    }

    let (dom, day_rule) = rewrite_day_of_month(dom)?;
    let year = match fields.get(6) {
        Some(year) => YEAR.rewrite(year)?,
        None => "*".to_owned(),
    };
    let pattern = [
        SECONDS.rewrite(fields[0])?,
        MINUTES.rewrite(fields[1])?,
        HOURS.rewrite(fields[2])?,
        dom,
        MONTH.rewrite(fields[4])?,
        rewrite_day_of_week(dow)?,
        year,
    ]
    .join(" ");
    Ok(Rewritten { pattern, day_rule })
}

/// Day-of-month: `?`, `L`, `LW`, `L-n`, `L-nW` and `nW` stand alone; anything else is a plain
/// field.
fn rewrite_day_of_month(text: &str) -> Result<(String, Option<DayRule>), Error> {
    let f = &DAY_OF_MONTH;
    let upper = text.to_ascii_uppercase();
    if upper == "?" || upper == "L" || upper == "LW" {
        return Ok((upper, None));
    }
    if let Some(offset) = upper.strip_prefix("L-") {
        let (digits, weekday) = match offset.strip_suffix('W') {
            Some(digits) => (digits, true),
            None => (offset, false),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(f.err(format!(
                "\"{text}\": the offset after \"L-\" must be a number 0-30"
            )));
        }
        let n = digits.parse::<u32>().unwrap_or(u32::MAX);
        if n > 30 {
            return Err(f.err(format!(
                "\"{text}\": the offset \"{digits}\" is out of range 0-30"
            )));
        }
        // `L-0` is `L`; croner does that one itself.
        return Ok(match (n, weekday) {
            (0, false) => ("L".to_owned(), None),
            (0, true) => ("LW".to_owned(), None),
            // croner matches every day; the rule then keeps one day per month.
            (n, false) => ("*".to_owned(), Some(DayRule::BeforeLast(n as u8))),
            (n, true) => (
                "*".to_owned(),
                Some(DayRule::WeekdayNearBeforeLast(n as u8)),
            ),
        });
    }
    if let Some(day) = upper.strip_suffix('W')
        && !day.is_empty()
        && day.bytes().all(|b| b.is_ascii_digit())
    {
        let day = f.value(day)?;
        return Ok((format!("{day}W"), None));
    }
    if upper.contains('L') || upper.contains('W') {
        return Err(f.err(format!(
            "\"{text}\" is not valid: L, LW, L-n and nW stand alone (as in L, LW, L-3, 15W)"
        )));
    }
    Ok((f.rewrite(text)?, None))
}

/// Day-of-week: `?`, `L`, `nL` and `n#k` stand alone; anything else is a plain field.
fn rewrite_day_of_week(text: &str) -> Result<String, Error> {
    let f = &DAY_OF_WEEK;
    if text == "?" {
        return Ok("?".to_owned());
    }
    // Alone, `L` is the last day of the week: Saturday.
    if text.eq_ignore_ascii_case("L") {
        return Ok("7".to_owned());
    }
    let is_list = text.contains([',', '-', '/']);
    if text.contains('#') {
        if is_list || text.matches('#').count() > 1 {
            return Err(f.err(format!(
                "\"{text}\": n#k stands alone (as in 6#3, the third friday)"
            )));
        }
        let (day, nth) = text.split_once('#').unwrap_or((text, ""));
        let day = f.value(day)?;
        if nth.is_empty() || !nth.bytes().all(|b| b.is_ascii_digit()) {
            return Err(f.err(format!(
                "\"{text}\": the occurrence after \"#\" must be a number 1-5"
            )));
        }
        let nth_value = nth.parse::<u32>().unwrap_or(u32::MAX);
        if !(1..=5).contains(&nth_value) {
            return Err(f.err(format!(
                "\"{text}\": the occurrence \"{nth}\" is out of range 1-5"
            )));
        }
        return Ok(format!("{day}#{nth_value}"));
    }
    // `nL` (`6L`, `FRIL`): the last such day of the month. No day name contains an L, so any L
    // here is the modifier.
    if text.contains(['L', 'l']) {
        if is_list {
            return Err(f.err(format!(
                "\"{text}\": nL stands alone (as in 6L, the last friday)"
            )));
        }
        let Some(day) = text.strip_suffix(['L', 'l']) else {
            return Err(f.err(format!(
                "\"{text}\" is not valid: L stands alone or after one day (as in L, 6L)"
            )));
        };
        let day = f.value(day)?;
        return Ok(format!("{day}L"));
    }
    f.rewrite(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(expr: &str) -> String {
        rewrite(expr).unwrap().pattern
    }

    #[test]
    fn rewrites_to_numbers_and_plain_ranges() {
        assert_eq!(pattern("0 0 12 * * ?"), "0 0 12 * * ? *");
        assert_eq!(pattern("0 0 12 * * *"), "0 0 12 ? * * *");
        assert_eq!(pattern("0 15 10 ? jan-Mar MON-fri"), "0 15 10 ? 1-3 2-6 *");
        assert_eq!(
            pattern("*/5 0/15 22-2 ? NOV-FEB SUN"),
            "0-59/5 0-59/15 22,23,0,1,2 ? 11,12,1,2 1 *"
        );
        assert_eq!(
            pattern("50-10/5 * * 1 * ? 2030/5"),
            "50,55,0,5,10 * * 1 * ? 2030-2099/5"
        );
        assert_eq!(pattern("0 0 0 ? * FRI-MON"), "0 0 0 ? * 6,7,1,2 *");
        assert_eq!(pattern("0 0 0 ? * L"), "0 0 0 ? * 7 *");
        assert_eq!(pattern("0 0 0 ? * friL"), "0 0 0 ? * 6L *");
        assert_eq!(pattern("0 0 0 ? * mon#2"), "0 0 0 ? * 2#2 *");
        assert_eq!(pattern("0 0 0 lw * ?"), "0 0 0 LW * ? *");
        assert_eq!(pattern("0 0 0 15w * ?"), "0 0 0 15W * ? *");
        assert_eq!(pattern("0 0 0 * * 1,*"), "0 0 0 ? * * *");
    }

    #[test]
    fn l_minus_n_becomes_a_day_rule() {
        let r = rewrite("0 0 0 L-3 * ?").unwrap();
        assert_eq!(r.pattern, "0 0 0 * * ? *");
        assert_eq!(r.day_rule, Some(DayRule::BeforeLast(3)));
        assert_eq!(rewrite("0 0 0 L-0 * ?").unwrap().pattern, "0 0 0 L * ? *");
    }

    #[test]
    fn day_rule_days() {
        // February 2024 has 29 days; the 26th is a Monday, the 24th a Saturday.
        assert_eq!(DayRule::BeforeLast(3).day_in(2024, 2), Some(26));
        assert_eq!(DayRule::WeekdayNearBeforeLast(5).day_in(2024, 2), Some(23));
        assert_eq!(DayRule::BeforeLast(29).day_in(2024, 2), None);
        assert_eq!(DayRule::BeforeLast(28).day_in(2024, 2), Some(1));
    }
}
