from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "earmark.settings")
application = get_wsgi_application()
# Import every view, and all they import, while the web process boots rather than in its
# first request: a worker gunicorn starts to replace one that died would otherwise hold that
# request for seconds, and on a loaded machine past gunicorn's timeout (30 s), which kills
# the worker mid-request (a 500, then the same again).
get_resolver().url_patterns  # noqa: B018  (the property loads the URLconf)
