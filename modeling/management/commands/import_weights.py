from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from modeling.ml.config_released import RELEASED_KINDS as KINDS


class Command(BaseCommand):
    help = (
        "Convert the authors' released weights (PANNs, ACT, V-ACT, MAAC) into an Earmark "
        "weights file or checkpoint in ENCODER_WEIGHTS_DIR/released/. Kinds: "
        + "; ".join(f"{kind}: {what}" for kind, what in KINDS.items())
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", choices=sorted(KINDS))
        parser.add_argument("file", help="the released file")
        parser.add_argument("--words", help="the released word list (words_list.p)")
        parser.add_argument(
            "--keyword-words", help="MAAC: the keyword-to-word list (TaggingToEmbs.p)"
        )
        parser.add_argument("--name", default="", help="stored file name, without .pt")

    def handle(
        self,
        *args: Any,
        kind: str,
        file: str,
        words: str | None,
        keyword_words: str | None,
        name: str,
        **options: Any,
    ) -> None:
        from modeling.ml.released import ReleasedWeightsError
        from modeling.weights import weights_import

        try:
            imported = weights_import(
                kind=kind, path=file, words=words, keyword_words=keyword_words, name=name
            )
        except (ReleasedWeightsError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from None
        release = imported.release.name if imported.release else "not a known release"
        self.stdout.write(f"{kind} ({release}) -> {imported.path}")
        for note in imported.notes:
            self.stdout.write(f"  {note}")
