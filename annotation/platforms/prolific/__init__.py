"""Prolific: a published batch offered as one Prolific study (publish.py), whose
participants arrive on this site's Prolific page (views.py, checked in page.py), come back
to Prolific with the study's completion code, and whose decisions, bonuses, returns and
money are kept in step by the periodic job (sync.py). Prolific's ids for Earmark's rows
(the study, each session, each participant, each bonus payment) are PlatformRef rows.

The API is Prolific's REST API at settings.PROLIFIC_API_URL with PROLIFIC_TOKEN;
`manage.py prolific_check` tells whether the token and workspace work.
"""
