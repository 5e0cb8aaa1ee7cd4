from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm, UserCreationForm
from django_countries import countries

from core.models import Role, SampleRate
from core.usernames import username_reserved_check


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    audio_sample_rate = forms.TypedChoiceField(
        choices=SampleRate.choices,
        coerce=int,
        initial=SampleRate.KHZ_32,
        label="Audio sample rate",
        help_text="Clips are stored as mono WAV at this rate.",
    )


class InviteForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANNOTATOR)
    expires_in_days = forms.IntegerField(min_value=1, max_value=365, initial=30, required=False)
    max_uses = forms.IntegerField(min_value=1, required=False)


def country_field(*, required: bool) -> forms.ChoiceField:
    return forms.ChoiceField(
        choices=[("", "Choose your country…"), *countries],
        required=required,
        label="Country you live in",
        help_text="Some batches are open only to workers in certain countries (as on MTurk); "
        "reviewers of your projects see it.",
    )


class SignupForm(UserCreationForm):
    country = country_field(required=True)

    def clean_username(self) -> str:
        username = super().clean_username()
        username_reserved_check(username)
        return username


class CountryForm(forms.Form):
    country = country_field(required=False)


class UserAddForm(AdminUserCreationForm):
    """The admin's "add user" form: staff cannot make an `mturk-` account either."""

    def clean_username(self) -> str:
        username = super().clean_username()
        username_reserved_check(username)
        return username


class UserEditForm(UserChangeForm):
    """The admin's user form: a name may not become a reserved one; the site's own
    `mturk-` accounts keep theirs while staff edit other fields."""

    def clean_username(self) -> str:
        username: str = self.cleaned_data["username"]
        if username != self.initial.get("username"):
            username_reserved_check(username)
        return username


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop'.")
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        required=False,
        min_value=1,
        max_value=3650,
        help_text="Empty: never.",
    )
    read_only = forms.BooleanField(
        label="Read-only", required=False, help_text="Only GET requests: it can change nothing."
    )
