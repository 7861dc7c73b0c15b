"""The explanation report of one model version (``camserve audit``): for each method and
candidate layer, a sanity check by cascading randomisation of the weights, faithfulness (ROAD,
deletion and insertion) and, when boxes are given, localisation."""
