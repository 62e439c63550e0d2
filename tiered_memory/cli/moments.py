"""A moment on the command line (``search --as-of``): epoch milliseconds, or an ISO 8601
date or time (UTC unless it names a zone)."""

from __future__ import annotations

from datetime import UTC, datetime

import click


class MomentType(click.ParamType[int, object]):
    """Epoch milliseconds from ``1700000000000``, ``2024-05-01`` or ``2024-05-01T12:30+02:00``."""

    name = "moment"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text.isdigit():
            return int(text)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(
                f"{text!r} is neither epoch milliseconds nor an ISO 8601 date or time "
                "(e.g. 2024-05-01 or 2024-05-01T12:30:00+02:00)",
                param,
                ctx,
            )
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        millis = int(moment.timestamp() * 1000)
        if millis < 0:
            self.fail(f"{text!r} is before 1970", param, ctx)
        return millis
