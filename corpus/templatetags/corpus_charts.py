from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from corpus import charts

register = template.Library()


@register.filter
def length_svg(data: dict[str, Any]) -> SafeString:
    return mark_safe(charts.length_svg(data))


@register.filter
def labels_svg(data: dict[str, Any]) -> SafeString:
    return mark_safe(charts.labels_svg(data))
