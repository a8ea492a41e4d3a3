"""AIPA: predict a job's next run (file names, bytes, stripe counts, ranks) from its past runs.

Pure: plain data in, plain data out. See docs/prediction.md.
"""

from iez.predict.accuracy import accuracy
from iez.predict.aipa import Prediction, predict_next_run
from iez.predict.arima import PredictionError
from iez.predict.retrace import needs_retrace

__all__ = ["Prediction", "PredictionError", "accuracy", "needs_retrace", "predict_next_run"]
