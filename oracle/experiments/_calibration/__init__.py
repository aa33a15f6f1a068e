"""What the classifier-training kinds (scaling, labels) share about calibration, in the layout of
a kind: this light half holds the captions of the shared artifacts, ``report`` their
reliability diagrams, agreement figure and numbers, ``findings`` their finding sentences."""

#: Columns of a runs frame that measure calibration (fractions, i.e. probabilities).
CALIBRATION_COLUMNS = ("ece", "ece_posterior", "calibration_pointwise", "overconfidence", "overconfidence_truth",
                       "brier")

AGREEMENT_CAPTION = (
    "ECE against labels versus against the truth, one point per classifier: x, the true "
    "calibration error in the same 10 bins (correctness replaced by the exact p(yhat|x)); y, "
    "the ECE a benchmark computes from the world's labels; the diagonal is agreement. Right: "
    "the label ECE minus the true one against N.")

RELIABILITY_CAPTION = (
    "Reliability diagrams pooled over seeds, 10 equal-width confidence bins: bars, the "
    "empirical frequency of correct predictions against the world's labels; points, the mean "
    "true probability p(yhat|x) in the bin (exact, from the oracle); the dashed diagonal is "
    "perfect calibration; the number of predictions in each bin is printed under its bar, and a bin "
    "of fewer than 10 predictions is faded (hatched bar, hollow point): its frequency is mostly noise.")
