//! Wall-clock times to instants in a time zone, under Tickwork's DST policy (see the parent
//! module).
//!
//! Between two transitions a zone's offset is constant, so wall-clock order and instant order
//! agree there and one civil search answers. Across a transition the wall clock jumps: forward
//! (a gap, whose wall times fire together at the transition) or back (an overlap, whose wall
//! times come a second time after the transition). Walking the zone one such segment at a time
//! gives every fire in instant order.
//!
//! All times here are whole seconds: `local` seconds are a wall-clock time counted as if it
//! were UTC, so that `local = instant + offset`.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};

use super::CronExpr;

/// jiff offsets lie within ±25:59:59, so no transition moves the wall clock by 52 hours or more;
/// further than that from a transition, its gap or overlap no longer matters.
const MAX_SHIFT_SECONDS: i64 = 52 * 3600;

fn civil(local: i64) -> Option<DateTime> {
    Some(Offset::UTC.to_datetime(Timestamp::from_second(local).ok()?))
}

fn local(dt: DateTime) -> Option<i64> {
    Some(Offset::UTC.to_timestamp(dt).ok()?.as_second())
}

/// The first fire of `expr` at or after the instant `from` (epoch seconds).
pub(super) fn first_fire_from(expr: &CronExpr, from: i64, tz: &TimeZone) -> Option<i64> {
    let mut at = from;
    // The last civil search, `(from, found)`: it stays the answer for a later search that starts
    // between the two, which saves the search when a fire lies several transitions ahead.
    let mut last_search: Option<(i64, i64)> = None;
    loop {
        let now = Timestamp::from_second(at).ok()?;
        // The transitions that open (at or before `at`) and close (after `at`) the segment of
        // constant offset that `at` lies in.
        let opened = tz.preceding(Timestamp::from_second(at + 1).ok()?).next();
        let closes = tz.following(now).next().map(|t| t.timestamp().as_second());
        let offset = i64::from(
            opened
                .as_ref()
                .map_or_else(|| tz.to_offset(now), |t| t.offset())
                .seconds(),
        );

        let mut search_from = at + offset;
        if let Some(transition) = opened {
            let start = transition.timestamp().as_second();
            if at - start < MAX_SHIFT_SECONDS {
                let before = i64::from(
                    tz.to_offset(Timestamp::from_second(start - 1).ok()?)
                        .seconds(),
                );
                // A gap opens right here: wall times in [start + before, start + offset) do not
                // exist, and any of them that match fire now, as one.
                if before < offset
                    && at == start
                    && let Some(found) = expr.next_civil(civil(start + before)?)
                    && local(found)? < start + offset
                {
                    return Some(start);
                }
                // An overlap: wall times in [start + offset, start + before) come a second time.
                // They fired in their first occurrence; only an every-hour schedule fires again.
                if before > offset && !expr.repeats_in_overlap() {
                    search_from = search_from.max(start + before);
                }
            }
        }

        let found = match last_search {
            Some((searched_from, found))
                if searched_from <= search_from && search_from <= found =>
            {
                found
            }
            _ => local(expr.next_civil(civil(search_from)?)?)?,
        };
        last_search = Some((search_from, found));
        match closes {
            // The match lies past this segment's wall clock: go on from the next transition.
            Some(end) if found >= end + offset => at = end,
            _ => return Some(found - offset),
        }
    }
}

/// The instant of a wall-clock time in `tz` under the same policy: a time in a gap is the first
/// instant after the gap, a repeated time its first occurrence.
pub(crate) fn resolve(dt: DateTime, tz: &TimeZone) -> Option<Timestamp> {
    let ambiguous = tz.to_ambiguous_timestamp(dt);
    match ambiguous.offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(dt).ok(),
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(dt).ok(),
        // The transition lies after `dt` read with the later offset and at or before `dt` read
        // with the earlier one.
        AmbiguousOffset::Gap { after, .. } => {
            let earliest = after.to_timestamp(dt).ok()?;
            tz.following(earliest).next().map(|t| t.timestamp())
        }
    }
}
