"""Test settings: the real settings, with a test secret and fast password hashing.

Celery stays asynchronous: unit tests run jobs through core.services.job_run directly,
and tests/core/test_worker.py drives a real worker process on the configured broker.
"""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
# Tests need no Redis of their own: without CELERY_BROKER_URL they use kombu's filesystem
# transport (tests run a worker or two for seconds; its race between consumers killed a
# worker of a full stack after 28 minutes). Set here, not only in Django's settings,
# because Celery reads the variable first and the workers tests start inherit it. CI sets
# CELERY_BROKER_URL to a real Redis.
os.environ.setdefault("CELERY_BROKER_URL", "filesystem://")

from earmark.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The test client and the live server speak plain HTTP: no redirect to HTTPS, no HSTS, and
# cookies a browser sends over HTTP (tests/core/test_deploy.py checks production's own).
SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
# Test cases may query only "default", so job progress goes through it (see
# core.services.Progress._write); production keeps its second connection on PostgreSQL.
DATABASES.pop(PROGRESS_DB, None)  # noqa: F405
# The flags' meaning model: tests never learn one implicitly (a test seeding many captions
# would leave a model behind that later tests' flags then use) nor from ../shared/data
# (minutes); without one the flags fall back to CIDEr-D consensus, and the tests that need
# a model learn it from tests/fixtures/flags (tests/conftest.py: flag_model_file).
ACTIVE_FLAG_MODEL_AUTOBUILD = False
ACTIVE_FLAG_MODEL_CAPTIONS = []
ACTIVE_FLAG_MODEL_ONTOLOGY = BASE_DIR / "tests" / "fixtures" / "audioset_ontology.json"  # noqa: F405
ACTIVE_FLAG_MODEL_DIR = VAR_DIR / "test-flags" / str(os.getpid())  # noqa: F405
