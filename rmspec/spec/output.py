"""`output:` and `tracking:` where results go."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rmspec.spec.base import Section

ReportKind = Literal["console", "html", "json"]


def _default_report() -> list[ReportKind]:
    return ["console", "html"]


class OutputSpec(Section):
    dir: str = Field(
        "runs/{name}", description="Run directory; {name} is the spec's name. Relative to the working directory."
    )
    push_to_hub: bool = Field(False, description="Upload the final model and card after everything is saved locally.")
    hub_repo_id: str | None = Field(None, description="Target repository (org/name) for push_to_hub.")
    hub_token_env: str = Field("HF_TOKEN", description="Environment variable holding the hub token.")
    private: bool = Field(True, description="Create the hub repository as private.")
    report: list[ReportKind] = Field(
        default_factory=_default_report,
        description="At the end of a run: console prints the summary, html writes report.html. results.json is "
        "always written (rmspec report and eval read it), so json is refused.",
    )


class WandbSpec(Section):
    project: str = Field("rmspec", description="Weights & Biases project.")
    mode: Literal["online", "offline"] = Field(
        "offline", description="offline writes locally; sync later with `wandb sync`."
    )


class MlflowSpec(Section):
    experiment: str = Field("rmspec", description="MLflow experiment name.")
    tracking_uri: str | None = Field(
        None, description="MLflow tracking URI; default a SQLite store in the run directory (RUN/mlflow.db)."
    )


class SwanlabSpec(Section):
    project: str = Field("rmspec", description="SwanLab project.")
    mode: Literal["offline", "local", "cloud"] = Field(
        "offline", description="offline writes RUN/swanlog (sync later with `swanlab sync`); cloud uploads."
    )


class TrackioSpec(Section):
    project: str = Field(
        "rmspec", description="Trackio project (its local store: RUN/trackio unless TRACKIO_DIR is set)."
    )
    space_id: str | None = Field(None, description="A Hugging Face Space to sync to; none keeps everything local.")


class TrackingSpec(Section):
    backends: list[Literal["tensorboard", "wandb", "mlflow", "trackio", "swanlab"]] = Field(
        default_factory=list,
        description=(
            "Extra trackers, each logging metrics.jsonl's names and values with the spec and plan as config; "
            "local or offline unless their settings say otherwise. metrics.jsonl is always written."
        ),
    )
    wandb: WandbSpec = Field(default_factory=WandbSpec, description="Weights & Biases settings.")
    mlflow: MlflowSpec = Field(default_factory=MlflowSpec, description="MLflow settings (mlflow-skinny is enough).")
    swanlab: SwanlabSpec = Field(default_factory=SwanlabSpec, description="SwanLab settings.")
    trackio: TrackioSpec = Field(default_factory=TrackioSpec, description="Trackio settings.")

    @model_validator(mode="after")
    def _settings_need_their_backend(self) -> TrackingSpec:
        unused = sorted(
            name
            for name in ("wandb", "mlflow", "swanlab", "trackio")
            if name in self.model_fields_set and name not in self.backends
        )
        if unused:
            raise ValueError(
                f"tracking.{unused[0]} is set but {unused[0]} is not in tracking.backends, so it would do nothing: "
                f"add {unused[0]} to tracking.backends, or delete tracking.{unused[0]}"
            )
        return self
