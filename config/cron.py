"""A standard five-field cron line (minute, hour, day of month, month, day of week), as Backup for
GKE reads a backup plan's `cronSchedule` ("a standard cron string", in UTC): when it fires, and the
shortest time between two of its firings, which bounds how long its backups may be kept
(config/reliability.py).

The fields as the standard cron (crontab(5)) has them: `*`, a number, a range `a-b`, a step
`*/n`, `a-b/n` or `a/n` (a to the field's end), lists of those with commas; month and weekday
names (`jan`, `mon`); weekday 0 or 7 is Sunday. When both day of month and day of week are
restricted, a day matches if either does. Readers differ on what "restricted" means for a day
field written `*/n`: cronie and Vixie cron (src/entry.c: `if (ch == '*') e->flags |= DOM_STAR`, the
field's first character) count it as unrestricted, croniter as restricted; Google does not say
which its reader follows, so the shortest gap is the shorter of both readings. Nothing else (`L`, `W`, `#`,
`?`, `@daily`) is standard, so nothing else is read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from dataclasses import dataclass

MINUTES_A_DAY = 24 * 60
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, lowest, highest, names from lowest on)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _WEEKDAYS),
)
# The days searched for the shortest gap between firing days: 28 years repeat every pairing of
# dates, weekdays and leap years of 1901-2099, and one more year covers the gaps across a year's end.
_FIRST_DAY, _DAYS_SEARCHED = dt.date(2001, 1, 1), (dt.date(2030, 1, 1) - dt.date(2001, 1, 1)).days


class CronError(ValueError):
    """What is wrong with a cron line, in words for an error message."""


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool

    def fires_on(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        by_date, by_weekday = day.day in self.days, (day.weekday() + 1) % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_date or by_weekday
        return by_date and by_weekday


def _value(text: str, field: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text.lower() in names:
        return low + names.index(text.lower())
    if not text.isdigit():
        raise CronError(f"the {field} field has {text!r}, which is not a number{' or a name' if names else ''}")
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"the {field} field has {value}, outside {low}-{high}")
    return value


def _field(text: str, field: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        span, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"the {field} field has the step {step_text!r}, which is not a whole number from 1")
            step = int(step_text)
        if span == "*":
            first, last = low, high
        elif "-" in span:
            start, _, end = span.partition("-")
            first, last = _value(start, field, low, high, names), _value(end, field, low, high, names)
            if first > last:
                raise CronError(f"the {field} field has the range {span!r}, which runs backwards")
        else:
            first = _value(span, field, low, high, names)
            last = high if step_text else first
        values.update(range(first, last + 1, step))
    return frozenset(values)


@functools.cache
def parse(line: str) -> Cron:
    parts = line.split()
    if len(parts) != len(_FIELDS):
        raise CronError(f"it has {len(parts)} fields, not 5")
    minutes, hours, days, months, weekdays = (_field(text, *spec) for text, spec in zip(parts, _FIELDS))
    # Restricted as cronie reads it (a field not starting with `*`); readings() adds croniter's.
    return Cron(minutes, hours, days, months, frozenset(d % 7 for d in weekdays), not parts[2].startswith("*"), not parts[4].startswith("*"))


def readings(line: str) -> set[Cron]:
    """The line as each common reader takes it: one reading, or two when a day field is `*/n`
    with the other day field restricted (the module's docstring)."""
    cron = parse(line)
    day_of_month, day_of_week = line.split()[2], line.split()[4]
    stepped = dataclasses.replace(
        cron,
        days_restricted=cron.days_restricted or (day_of_month != "*" and day_of_month.startswith("*")),
        weekdays_restricted=cron.weekdays_restricted or (day_of_week != "*" and day_of_week.startswith("*")),
    )
    return {cron, stepped}


def _gap(cron: Cron) -> int | None:
    times = sorted(h * 60 + m for h in cron.hours for m in cron.minutes)
    days = [n for n in range(_DAYS_SEARCHED) if cron.fires_on(_FIRST_DAY + dt.timedelta(days=n))]
    if not days:
        return None
    gaps = [b - a for a, b in zip(times, times[1:])]
    if len(days) > 1:  # from a firing day's last time to the next firing day's first
        gaps.append(min(b - a for a, b in zip(days, days[1:])) * MINUTES_A_DAY - times[-1] + times[0])
    return min(gaps) if gaps else None


@functools.cache
def shortest_gap_minutes(line: str) -> int | None:
    """The shortest time between two firings of the line, in minutes, under any common reading;
    None if it never fires (a date no month has, such as 30 2). Raises CronError for a line that
    is not standard cron."""
    gaps = [gap for gap in map(_gap, readings(line)) if gap is not None]
    return min(gaps) if gaps else None
