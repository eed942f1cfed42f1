"""The attribute-pattern table: which statements name the same attribute of the same subject."""

import pytest

from memlane.policies.dream_attributes import normalise, parse, same_value


def facts(text):
    return {(f.subject, f.attribute, f.value) for f in parse(text)}


@pytest.mark.parametrize("text, expected", [
    ("Ann lives in Boston.", {("ann", "residence", "boston")}),
    ("Ann moved from Boston to Denver.", {("ann", "residence", "denver")}),
    ("Ann: Last year Ann relocated to Denver, Colorado for work.", {("ann", "residence", "denver")}),
    ("Since Monday Ann lives in Austin.", {("ann", "residence", "austin")}),
    ("The user lives in New York City with their partner.", {("user", "residence", "new york city")}),
    ("Ann works as a nurse at St. Mary's hospital in Denver.",
     {("ann", "occupation", "nurse"), ("ann", "employer", "st mary's hospital")}),
    ("Omar works at Google.", {("omar", "employer", "google")}),
    ("Ann is married to Tom.", {("ann", "spouse", "tom"), ("ann", "marital_status", "married")}),
    ("Ann's favourite colour is blue.", {("ann", "favorite_color", "blue")}),
    ("Ann: Blue is Ann's favourite colour.", {("ann", "favorite_color", "blue")}),
    ("Ann is 34 years old.", {("ann", "age", "34")}),
    ("Ann is a vegetarian.", {("ann", "diet", "vegetarian")}),
    ("Ann adopted a beagle named Max last Saturday.", {("ann", "pets", "beagle max")}),
    ("Ann is allergic to peanuts.", {("ann", "allergies", "peanut")}),
    ("Ann has a peanut allergy.", {("ann", "allergies", "peanut")}),
    ("Ann loves hiking in the mountains.", {("ann", "preference:hiking", "like")}),
    ("Ann can't stand coffee.", {("ann", "preference:coffee", "dislike")}),
    ("Ann's sister lives in Paris.", {("ann's sister", "residence", "paris")}),
    ("Caroline went to the support group yesterday.", set()),
])
def test_statements_map_to_subject_attribute_value(text, expected):
    assert facts(text) == expected


def test_change_statements_carry_the_value_they_replace():
    (moved,) = parse("Ann moved from Boston to Denver.")
    assert moved.change and moved.old_value == "boston" and moved.single
    (lives,) = parse("Ann lives in Denver.")
    assert not lives.change and lives.old_value is None


def test_multi_valued_attributes_are_not_single():
    assert not parse("Ann has a dog named Max.")[0].single
    assert parse("Ann lives in Denver.")[0].single


def test_normalise_and_same_value():
    assert normalise("the peanuts") == "peanut"
    assert normalise("Paris") == "paris"  # names keep their s
    assert normalise("favourite colour") == "favorite color"
    assert same_value("denver", "denver colorado") and not same_value("boston", "denver")
    assert not same_value("", "denver")
